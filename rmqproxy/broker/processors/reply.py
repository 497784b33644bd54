"""SEND_REPLY_MESSAGE (324) and SEND_REPLY_MESSAGE_V2 (325): a responder's reply to a request,
pushed to the requesting client with PUSH_REPLY_MESSAGE_TO_CLIENT (326) (docs/protocol.md,
Request-reply).

The requester (``DefaultMQProducer.request``) named itself in ``REPLY_TO_CLIENT``; its producer
connection is found by that client id. The reply is also stored in its topic
(``<cluster>_REPLY_TOPIC``) unless ``storeReplyMessageEnable=false``. The answer waits for the
requester's: SUCCESS once it took the reply, else SYSTEM_ERROR with the reference's remarks.
"""

from __future__ import annotations

from twisted.internet import defer
from twisted.python.failure import Failure

from codec import message as codec_message  # its hot names: codec.implementation rebinds them
from codec.codes import RequestCode, ResponseCode
from codec.command import RemotingCommand
from codec.headers import ReplyMessageRequestHeader, SendMessageResponseHeader
from codec.message import Message

from ..clients import ClientRegistry
from ...core.config import Config
from ...net.dispatch import Route
from ..store import MessageStore, PutTicket
from .send import SEND_RESPONSE_EXTRAS, SendProcessor

#: How long the requester has to take a reply (the reference's synchronous push uses 3 s).
PUSH_TIMEOUT_S = 3.0


class ReplyProcessor:
    def __init__(self, config: Config, store: MessageStore, clients: ClientRegistry, send: SendProcessor) -> None:
        self.config = config
        self.store = store
        self.clients = clients
        self.send = send

    def routes(self) -> list[Route]:
        """This processor's entries of the dispatch table."""
        return [
            Route(RequestCode.SEND_REPLY_MESSAGE, self.reply),
            Route(RequestCode.SEND_REPLY_MESSAGE_V2, self.reply),
        ]

    def reply(self, request: RemotingCommand, header, conn) -> RemotingCommand | defer.Deferred:
        target = self.send.target(request, header)
        if target.__class__ is RemotingCommand:
            return target
        _topic, queue_id = target
        properties = codec_message.string_to_properties(header.properties or "")
        requester = properties.get("REPLY_TO_CLIENT")
        if not requester:
            return request.response(ResponseCode.SYSTEM_ERROR, "reply message properties[REPLY_TO_CLIENT] is null")
        ticket = None
        if self.config.store_reply_message:
            ticket = self.store.put(Message(
                header.topic, request.body, dict(properties), queue_id=queue_id, flag=header.flag,
                sys_flag=header.sys_flag, born_timestamp=header.born_timestamp, born_host=conn.born_host,
                reconsume_times=header.reconsume_times or 0,
            ))  # fmt: skip
        requester_conn = self.clients.producer_connection(requester)
        if requester_conn is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"push reply message fail, channel of <{requester}> not found.")
        now_ms = int(self.store.clock() * 1000)
        push_props = codec_message.properties_to_string({**properties, "PUSH_REPLY_TIME": str(now_ms)})
        born = conn.born_host
        push = ReplyMessageRequestHeader.CODEC.make(
            producer_group=header.producer_group, topic=header.topic, default_topic=header.default_topic,
            default_topic_queue_nums=header.default_topic_queue_nums, queue_id=queue_id, sys_flag=header.sys_flag,
            born_timestamp=header.born_timestamp, flag=header.flag, properties=push_props,
            reconsume_times=header.reconsume_times, unit_mode=header.unit_mode, born_host=f"{born.host}:{born.port}",
            store_host=self.config.advertised_address, store_timestamp=now_ms,
        )  # fmt: skip
        pushed = requester_conn.request(
            RemotingCommand(code=RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, ext_fields=push.to_ext(), body=request.body),
            PUSH_TIMEOUT_S,
        )

        def answered(response: RemotingCommand) -> RemotingCommand:
            if response.code != ResponseCode.SUCCESS:
                return request.response(ResponseCode.SYSTEM_ERROR, f"push reply message to {requester}fail.")
            return _answer(request, ticket, queue_id)

        def failed(_failure: Failure) -> RemotingCommand:
            return request.response(ResponseCode.SYSTEM_ERROR, f"push reply message to {requester}fail.")

        return pushed.addCallbacks(answered, failed)


def _answer(request: RemotingCommand, ticket: PutTicket | None, queue_id: int) -> RemotingCommand:
    """SUCCESS with the stored copy's ids, or "0" ones when the reply was not (yet) stored."""
    msg_id, offset = "0", 0
    if ticket is not None and ticket.done and ticket.result.ok:
        stored = ticket.result.messages[0]
        msg_id, queue_id, offset = stored.offset_msg_id, stored.queue_id, stored.queue_offset
    header = SendMessageResponseHeader.CODEC.make(msg_id=msg_id, queue_id=queue_id, queue_offset=offset)
    return request.response(ResponseCode.SUCCESS, ext_fields=header.to_ext(SEND_RESPONSE_EXTRAS))
