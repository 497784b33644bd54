"""CONSUMER_SEND_MSG_BACK (36): a consumer gives a message back for a later retry (docs/protocol.md, Send-back and retries).

The original is looked up by its physical offset and stored again in ``%RETRY%<group>`` through
a delay level (``delayLevel`` or, when 0, 3 + reconsumeTimes), or in ``%DLQ%<group>`` once its
reconsume times reach the maximum (or ``delayLevel`` < 0). Each copy counts one more reconsume
and keeps the first id in ``ORIGIN_MESSAGE_ID`` and the real topic in ``RETRY_TOPIC``.
"""

from __future__ import annotations

from collections.abc import Callable

from twisted.internet import defer

from codec.codes import RequestCode, ResponseCode
from codec.command import RemotingCommand
from codec.message import BORNHOST_V6_FLAG, STOREHOST_V6_FLAG, Message

from ..dispatch import Route
from ..permission import BrokerPermission
from ..store import MessageStore, PutResult
from ..topics import TopicTable, check_group_name, dlq_topic, retry_topic
from .send import retries_used_up, sending_forbidden, when_stored


def _answer(request: RemotingCommand, result: PutResult) -> RemotingCommand:
    if result.ok:
        return request.response(ResponseCode.SUCCESS)
    return request.response(ResponseCode.SYSTEM_ERROR, f"{result.status.name}: {result.remark}")


class SendBackProcessor:
    def __init__(
        self, store: MessageStore, topics: TopicTable, on_send_back: Callable[[str, str], None] | None = None,
        permission: BrokerPermission | None = None, host: str = "",
    ) -> None:
        self.store = store
        self.topics = topics
        self.on_send_back = on_send_back  # (group, topic of the message given back), once it is stored
        self.permission = permission
        self.host = host  # named in the refusal while the broker takes no writes

    def routes(self) -> list[Route]:
        """This processor's entries of the dispatch table."""
        return [
            Route(RequestCode.CONSUMER_SEND_MSG_BACK, self.send_back),
        ]

    def send_back(self, request: RemotingCommand, header, conn) -> RemotingCommand | defer.Deferred:
        if check_group_name(header.group) is not None:
            return request.response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {header.group}"
            )
        if self.permission is not None and not self.permission.writable:
            return sending_forbidden(request, self.host)
        retry = retry_topic(header.group)
        self.topics.ensure(retry)
        original = self.store.look_message(header.offset)
        if original is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {header.offset}")
        props = dict(original.properties)
        props.setdefault("RETRY_TOPIC", original.topic)
        if not props.get("ORIGIN_MESSAGE_ID"):
            props["ORIGIN_MESSAGE_ID"] = header.origin_msg_id or original.offset_msg_id
        props.pop("DELAY", None)
        delay = header.delay_level
        topic = retry
        if retries_used_up(original.reconsume_times, header.max_reconsume_times) or delay < 0:
            topic = dlq_topic(header.group)
            self.topics.ensure(topic)
        else:
            props["DELAY"] = str(delay if delay > 0 else 3 + original.reconsume_times)
        msg = Message(
            topic, original.body, props, queue_id=0, flag=original.flag, sys_flag=original.sys_flag & ~(BORNHOST_V6_FLAG | STOREHOST_V6_FLAG),
            born_timestamp=original.born_timestamp, born_host=original.born_host,
            reconsume_times=original.reconsume_times + 1,
        )  # fmt: skip
        group, back_topic = header.group, original.topic

        def answer(req: RemotingCommand, result: PutResult) -> RemotingCommand:
            if result.ok and self.on_send_back is not None:
                self.on_send_back(group, back_topic)
            return _answer(req, result)

        return when_stored(self.store.put(msg), answer, request)
