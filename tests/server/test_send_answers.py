"""The send answer's ext fields are filled into a template rather than built through the header
codec (a hot path): they must be exactly what the codec writes, order included, since the binary
header encoding writes them in that order."""

from __future__ import annotations

from codec.codes import RequestCode as C
from codec.command import RemotingCommand
from codec.headers import SendMessageResponseHeader
from codec.message import HostPort, Message
from rmqproxy.broker.processors.send import SEND_RESPONSE_EXTRAS, answer_put

from .harness import make_server


def _codec_ext(result) -> dict[str, str]:
    first = result.messages[0]
    msg_id = first.offset_msg_id if len(result.messages) == 1 else ",".join(result.msg_ids)
    header = SendMessageResponseHeader.CODEC.make(msg_id=msg_id, queue_id=first.queue_id,
                                                  queue_offset=first.queue_offset)  # fmt: skip
    return header.to_ext(SEND_RESPONSE_EXTRAS)


def test_send_answers_carry_exactly_the_codecs_ext_fields_in_its_order(tmp_path) -> None:
    server, _reactor = make_server(tmp_path)
    request = RemotingCommand(code=C.SEND_MESSAGE_V2, opaque=7)
    try:
        host = HostPort("10.0.0.5", 5555)
        results = [server.store.put(Message("T", b"x", {}, queue_id=3, born_host=host)).result for _ in range(3)]
        batch = [Message("B", b"y", {}, queue_id=1, born_host=host) for _ in range(4)]
        results.append(server.store.put_batch(batch).result)
        for result in results:
            answer = answer_put(request, result)
            assert list(answer.ext_fields.items()) == list(_codec_ext(result).items())
        assert results[2].messages[0].queue_offset == 2 and "," in answer.ext_fields["msgId"]
    finally:
        server.stop()
