"""CONSUMER_SEND_MSG_BACK (36): a consumer gives a message back for a later retry (docs/protocol.md, Send-back and retries).

The original is looked up by its physical offset and stored again in ``%RETRY%<group>`` (one of
the group's ``retryQueueNums`` queues) through a delay level (``delayLevel`` or, when 0,
3 + reconsumeTimes), or in ``%DLQ%<group>`` once its reconsume times reach the maximum (the
request's ``maxReconsumeTimes``, else the group's ``retryMaxTimes``) or ``delayLevel`` < 0. Each
copy counts one more reconsume and keeps the first id in ``ORIGIN_MESSAGE_ID`` and the real
topic in ``RETRY_TOPIC``. A group with ``retryQueueNums`` 0 takes no retries: the message is
dropped and the answer is SUCCESS, as the reference answers it.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from twisted.internet import defer

from codec.codes import RequestCode, ResponseCode
from codec.command import RemotingCommand
from codec.message import BORNHOST_V6_FLAG, STOREHOST_V6_FLAG, Message

from ...net.dispatch import Route
from ..permission import BrokerPermission
from ..store import MessageStore, PutResult
from ..subgroups import FAQ_TODO, SubscriptionGroupTable, max_reconsume_times
from ..topics import TopicTable
from ...core.names import dlq_topic, retry_topic
from .send import sending_forbidden, when_stored


def given_back(original: Message, topic: str, queue_id: int, origin_msg_id: str | None = None) -> Message:
    """A copy of ``original`` given back to ``topic`` (a retry or dead-letter queue): one more
    reconsume, the first id in ``ORIGIN_MESSAGE_ID``, the real topic in ``RETRY_TOPIC``, no delay level."""
    props = dict(original.properties)
    props.setdefault("RETRY_TOPIC", original.topic)
    if not props.get("ORIGIN_MESSAGE_ID"):
        props["ORIGIN_MESSAGE_ID"] = origin_msg_id or original.offset_msg_id
    props.pop("DELAY", None)
    return Message(
        topic, original.body, props, queue_id=queue_id, flag=original.flag,
        sys_flag=original.sys_flag & ~(BORNHOST_V6_FLAG | STOREHOST_V6_FLAG), born_timestamp=original.born_timestamp,
        born_host=original.born_host, reconsume_times=original.reconsume_times + 1,
    )  # fmt: skip


def dead_letter_copy(original: Message, topic: str) -> Message:
    """A gRPC consumer's message for its group's dead-letter queue ``topic``: ``given_back``, with
    where it came from in ``DLQ_ORIGIN_TOPIC`` and ``DLQ_ORIGIN_MESSAGE_ID`` (as a 5.x broker marks it)."""
    copy = given_back(original, topic, 0, original.msg_id)
    copy.properties["DLQ_ORIGIN_TOPIC"] = original.topic
    copy.properties["DLQ_ORIGIN_MESSAGE_ID"] = original.msg_id
    return copy


def _answer(request: RemotingCommand, result: PutResult) -> RemotingCommand:
    if result.ok:
        return request.response(ResponseCode.SUCCESS)
    return request.response(ResponseCode.SYSTEM_ERROR, f"{result.status.name}: {result.remark}")


class SendBackProcessor:
    def __init__(
        self, store: MessageStore, topics: TopicTable, on_send_back: Callable[[str, str], None] | None = None,
        permission: BrokerPermission | None = None, host: str = "", *, groups: SubscriptionGroupTable,
    ) -> None:
        self.store = store
        self.topics = topics
        self.on_send_back = on_send_back  # (group, topic of the message given back), once it is stored
        self.permission = permission
        self.host = host  # named in the refusal while the broker takes no writes
        self.groups = groups

    def routes(self) -> list[Route]:
        """This processor's entries of the dispatch table."""
        return [
            Route(RequestCode.CONSUMER_SEND_MSG_BACK, self.send_back),
        ]

    def send_back(self, request: RemotingCommand, header, conn) -> RemotingCommand | defer.Deferred:
        config = self.groups.find(header.group)
        if config is None:
            return request.response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                self.groups.bound_remark(header.group) or f"subscription group not exist, {header.group} {FAQ_TODO}",
            )
        if self.permission is not None and not self.permission.writable:
            return sending_forbidden(request, self.host)
        if config.retry_queue_nums <= 0:
            return request.response(ResponseCode.SUCCESS)
        retry = retry_topic(header.group)
        retry_config = self.topics.ensure(retry, config.retry_queue_nums)
        if not retry_config.writable:
            return request.response(ResponseCode.NO_PERMISSION, f"the topic[{retry}] sending message is forbidden")
        queue_id = random.randrange(min(config.retry_queue_nums, retry_config.write_queue_nums) or 1)
        original = self.store.look_message(header.offset)
        if original is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {header.offset}")
        delay = header.delay_level
        if original.reconsume_times >= max_reconsume_times(request, header, config) or delay < 0:
            msg = given_back(original, dlq_topic(header.group), 0, header.origin_msg_id)
            self.topics.ensure(msg.topic)
        else:
            msg = given_back(original, retry, queue_id, header.origin_msg_id)
            msg.properties["DELAY"] = str(delay if delay > 0 else 3 + original.reconsume_times)
        group, back_topic = header.group, original.topic

        def answer(req: RemotingCommand, result: PutResult) -> RemotingCommand:
            if result.ok and self.on_send_back is not None:
                self.on_send_back(group, back_topic)
            return _answer(req, result)

        return when_stored(self.store.put(msg), answer, request)
