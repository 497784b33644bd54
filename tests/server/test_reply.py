"""Request-reply on the whole server (fake reactor): a reply is pushed to the client named in
REPLY_TO_CLIENT with PUSH_REPLY_MESSAGE_TO_CLIENT, answered once that client took it, stored in
the reply topic, and refused with the reference's remarks when it cannot be delivered."""

from __future__ import annotations

from codec import message as codec_message  # its hot names: codec.implementation rebinds them
from codec.bodies import HeartbeatData, ProducerData
from codec.codes import RequestCode as C
from codec.codes import ResponseCode as R
from codec.command import RemotingCommand
from codec.headers import ReplyMessageRequestHeader

from .harness import Client
from .harness import send_header

REPLY_TOPIC = "DefaultCluster_REPLY_TOPIC"


def requester(server, client_id: str = "10.0.0.5@requester#1") -> Client:
    client = Client(server, client_id)
    data = HeartbeatData(client_id, [ProducerData("req-group")], [])
    assert client.call(C.HEART_BEAT, body=data.to_json()).code == 0
    return client


def reply_header(to: str | None):
    props = "MSG_TYPE\x01reply\x02CORRELATION_ID\x01c-1\x02TTL\x013000" + (f"\x02REPLY_TO_CLIENT\x01{to}" if to else "")
    return send_header(REPLY_TOPIC, 0, props)


def answer_push(client: Client, code: int = R.SUCCESS) -> RemotingCommand:
    """Take the one PUSH_REPLY_MESSAGE_TO_CLIENT written to ``client`` and answer it."""
    pushes = [c for c in client.read() if c.code == C.PUSH_REPLY_MESSAGE_TO_CLIENT and not c.is_response]
    assert len(pushes) == 1
    client.conn.dataReceived(pushes[0].response(code).encode())
    return pushes[0]


def test_a_reply_is_pushed_to_its_requester_answered_and_stored(servers, tmp_path) -> None:
    server, _ = servers(tmp_path)
    req = requester(server)
    responder = Client(server, "10.0.0.6@responder#1")
    opaque = responder.send(C.SEND_REPLY_MESSAGE_V2, reply_header(req.client_id), b"the answer")
    assert responder.answer(opaque) is None  # waits for the requester
    push = answer_push(req)
    header = ReplyMessageRequestHeader.CODEC.decode(push.ext_fields)
    props = codec_message.string_to_properties(header.properties)
    assert push.body == b"the answer" and header.topic == REPLY_TOPIC
    assert props["CORRELATION_ID"] == "c-1" and props["REPLY_TO_CLIENT"] == req.client_id and "PUSH_REPLY_TIME" in props
    answer = responder.answer(opaque)
    assert answer.code == R.SUCCESS and answer.ext_fields["msgId"] != "0"
    stored = server.store.message_at(REPLY_TOPIC, 0, 0)
    assert stored.body == b"the answer" and stored.properties["CORRELATION_ID"] == "c-1"


def test_replies_that_cannot_be_delivered_are_refused_with_the_reference_remarks(servers, tmp_path) -> None:
    server, reactor = servers(tmp_path, store_reply_message=False)
    responder = Client(server, "10.0.0.6@responder#1")
    no_target = responder.call(C.SEND_REPLY_MESSAGE, reply_header(None), b"x")
    assert (no_target.code, no_target.remark) == (R.SYSTEM_ERROR, "reply message properties[REPLY_TO_CLIENT] is null")
    gone = responder.call(C.SEND_REPLY_MESSAGE, reply_header("10.0.0.9@nobody#1"), b"x")
    assert (gone.code, gone.remark) == (R.SYSTEM_ERROR, "push reply message fail, channel of <10.0.0.9@nobody#1> not found.")
    req = requester(server)
    refused = responder.send(C.SEND_REPLY_MESSAGE_V2, reply_header(req.client_id), b"x")
    answer_push(req, R.SYSTEM_ERROR)
    assert responder.answer(refused).remark == f"push reply message to {req.client_id}fail."
    silent = responder.send(C.SEND_REPLY_MESSAGE_V2, reply_header(req.client_id), b"x")
    reactor.advance(3.1)  # the requester never answers the push
    assert responder.answer(silent).code == R.SYSTEM_ERROR
    assert server.store.max_offset(REPLY_TOPIC, 0) == 0  # storeReplyMessageEnable=false
