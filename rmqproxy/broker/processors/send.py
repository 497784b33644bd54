"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320): docs/protocol.md, Send.

Checks as the 4.9.8 broker makes them (topic name, auto-create through TBW102, queue id, body
size), stores with the broker's properties (``CLUSTER`` added, ``WAIT`` dropped), sends a retry
message that used up its reconsume times to the group's DLQ, and answers with the offset message
ids, first queue offset, ``MSG_REGION`` and ``TRACE_ON`` (the Java client reads ``MSG_REGION``
without a null check).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from twisted.internet import defer

from codec import message as codec_message  # its hot names: codec.implementation rebinds them
from codec.codes import RequestCode, ResponseCode
from codec.command import RemotingCommand
from codec.headers import SendMessageResponseHeader
from codec.message import BatchItem, Message, decode_batch

from ...core.config import Config
from ...net.dispatch import Route
from ..permission import BrokerPermission
from ..store import MessageStore, PutResult, PutStatus, PutTicket
from ...core.delay_levels import SCHEDULE_TOPIC
from ..subgroups import FAQ_TODO, SubscriptionGroupTable, max_reconsume_times
from ..topics import TopicConfig, TopicTable
from ...core.names import DLQ_PREFIX, NOT_ALLOWED_SEND_TOPICS, RETRY_PREFIX, check_new_topic, dlq_topic
from ..timer_messages import TIMER_KEYS, TimerRefused, TimerService, timer_delivery
from ..transaction_service import TransactionService, is_prepared, to_half

SEND_RESPONSE_EXTRAS = {"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}

#: The ext fields of a send answer as ``SendMessageResponseHeader``'s codec writes them (keys in
#: its order), to be filled in per answer: one copy and three stores instead of a header object.
_ANSWER_EXT = SendMessageResponseHeader.CODEC.make(msg_id="", queue_id=0, queue_offset=0).to_ext(SEND_RESPONSE_EXTRAS)
_PUT_STATUS_CODES = {
    PutStatus.PUT_OK: ResponseCode.SUCCESS,
    PutStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutStatus.CREATE_MAPPED_FILE_FAILED: ResponseCode.SYSTEM_ERROR,
    PutStatus.MESSAGE_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.PROPERTIES_SIZE_EXCEEDED: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.SERVICE_NOT_AVAILABLE: ResponseCode.SERVICE_NOT_AVAILABLE,
}


def when_stored(
    ticket: PutTicket, answer: Callable[[RemotingCommand, PutResult], RemotingCommand], request: RemotingCommand
) -> RemotingCommand | defer.Deferred:
    """``answer(request, result)`` now if the put is complete (ASYNC_FLUSH), else a Deferred of
    it that fires when its flush does (SYNC_FLUSH)."""
    if ticket.done:
        return answer(request, ticket.result)
    d: defer.Deferred = defer.Deferred()
    ticket.add_done_callback(lambda result: d.callback(answer(request, result)))
    return d


def answer_put(request: RemotingCommand, result: PutResult) -> RemotingCommand:
    """The send response for a store result (also used for send-back)."""
    status = result.status
    if not result.ok:
        return request.response(_PUT_STATUS_CODES[status], f"{status.name}: {result.remark}".rstrip(": "))
    messages = result.messages
    first = messages[0]
    ext = _ANSWER_EXT.copy()  # what the header codec writes, in its order, for a fraction of the cost
    ext["msgId"] = first.offset_msg_id if len(messages) == 1 else ",".join(result.msg_ids)
    ext["queueId"] = str(first.queue_id)
    ext["queueOffset"] = str(first.queue_offset)
    return request.response(_PUT_STATUS_CODES[status], ext_fields=ext)


def sending_forbidden(request: RemotingCommand, host: str) -> RemotingCommand:
    """The answer to a write while the broker has no WRITE permission (wipeWritePerm)."""
    return request.response(ResponseCode.NO_PERMISSION, f"the broker[{host}] sending message is forbidden")


def _answer_prepared(request: RemotingCommand, result: PutResult, real_queue: int) -> RemotingCommand:
    """A half message's send answer: its real queue id (as the reference answers) and, as 5.x
    brokers do, its transaction id (the ``UNIQ_KEY``)."""
    if not result.ok:
        return answer_put(request, result)
    half = result.messages[0]
    header = SendMessageResponseHeader.CODEC.make(
        msg_id=half.offset_msg_id, queue_id=real_queue, queue_offset=half.queue_offset,
        transaction_id=half.properties.get("UNIQ_KEY"),
    )  # fmt: skip
    return request.response(ResponseCode.SUCCESS, ext_fields=header.to_ext(SEND_RESPONSE_EXTRAS))


class SendProcessor:
    def __init__(
        self,
        config: Config,
        store: MessageStore,
        topics: TopicTable,
        on_put: Callable[[str, int, int, bool], None] | None = None,
        transactions: TransactionService | None = None,
        permission: BrokerPermission | None = None,
        *,
        groups: SubscriptionGroupTable,
    ) -> None:
        self.config = config
        self.permission = permission
        self.groups = groups
        self.store = store
        self.topics = topics
        self.on_put = on_put
        self.transactions = transactions
        self._round_robin = itertools.count()

    def routes(self) -> list[Route]:
        """This processor's entries of the dispatch table."""
        return [
            Route(RequestCode.SEND_MESSAGE, self.send),
            Route(RequestCode.SEND_MESSAGE_V2, self.send),
            Route(RequestCode.SEND_BATCH_MESSAGE, self.send),
        ]

    def send(self, request: RemotingCommand, header, conn) -> RemotingCommand | defer.Deferred:
        target = self.target(request, header)
        if target.__class__ is RemotingCommand:
            return target
        topic, queue_id = target
        properties = codec_message.string_to_properties(header.properties or "")
        properties.pop("WAIT", None)
        deliver_ms, now_ms = None, 0
        if not TIMER_KEYS.isdisjoint(properties):  # rare: no call for the others
            now_ms = int(self.store.clock() * 1000)
            try:
                deliver_ms = timer_delivery(properties, now_ms, self.config.timer_max_delay_sec, self.config.timer_wheel_enable)
            except TimerRefused as refused:
                return request.response(refused.code, refused.remark)
        properties["CLUSTER"] = self.config.cluster_name
        topic_name = header.topic
        if topic_name.startswith(RETRY_PREFIX) and not header.batch:
            group_name = topic_name[len(RETRY_PREFIX):]
            group_config = self.groups.find(group_name)
            if group_config is None:  # the reference's ``handleRetryAndDLQ``
                return request.response(
                    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                    self.groups.bound_remark(group_name) or f"subscription group not exist, {group_name} {FAQ_TODO}",
                )
            if (header.reconsume_times or 0) >= max_reconsume_times(request, header, group_config):
                topic_name = dlq_topic(group_name)
                self.topics.ensure(topic_name)
                queue_id = 0
                properties.pop("DELAY", None)
        born = conn.born_host

        def message(body: bytes, props: dict[str, str], flag: int) -> Message:
            return Message(
                topic_name, body, props, queue_id=queue_id, flag=flag, sys_flag=header.sys_flag,
                born_timestamp=header.born_timestamp, born_host=born, reconsume_times=header.reconsume_times or 0,
            )  # fmt: skip

        if header.batch or request.code == RequestCode.SEND_BATCH_MESSAGE:
            if topic_name.startswith((RETRY_PREFIX, DLQ_PREFIX)):
                return request.response(ResponseCode.MESSAGE_ILLEGAL, "batch message is not supported for retry topics")
            items: list[BatchItem] = decode_batch(request.body)
            if not items:
                return request.response(ResponseCode.MESSAGE_ILLEGAL, "empty batch")
            msgs = []
            for item in items:
                props = dict(item.properties)
                props.pop("WAIT", None)
                if not TIMER_KEYS.isdisjoint(props):
                    return request.response(ResponseCode.MESSAGE_ILLEGAL, "batch messages cannot be timer messages")
                for key, value in properties.items():
                    props.setdefault(key, value)  # an item's own properties win (apache/rocketmq#9416)
                if "DELAY" in props:
                    return request.response(ResponseCode.MESSAGE_ILLEGAL, "batch messages cannot be delayed")
                msgs.append(message(item.body, props, item.flag))
            if any(len(m.body) > self.config.max_message_size for m in msgs):
                return self._too_large(request)
            ticket = self.store.put_batch(msgs)
        elif "TRAN_MSG" in properties and is_prepared(properties):
            if deliver_ms is not None:
                return request.response(ResponseCode.MESSAGE_ILLEGAL, "a transactional message cannot be a timer message")
            return self._prepare(request, message(request.body, properties, header.flag))
        else:
            if len(request.body) > self.config.max_message_size:
                return self._too_large(request)
            msg = message(request.body, properties, header.flag)
            if deliver_ms is not None:
                TimerService.park(msg, deliver_ms, now_ms)
            ticket = self.store.put(msg)
        return when_stored(ticket, self._answer, request)

    def target(self, request: RemotingCommand, header) -> tuple[TopicConfig, int] | RemotingCommand:
        """The topic and queue a send (or a reply) goes to, the topic created on a first send as
        its template allows; or the reference's refusal."""
        if self.permission is not None and not self.permission.writable:
            return sending_forbidden(request, self.config.advertised_host)
        if header.topic in NOT_ALLOWED_SEND_TOPICS:
            return request.response(ResponseCode.NO_PERMISSION, f"Sending message to topic[{header.topic}] is forbidden.")
        topic = self.topics.get(header.topic)  # a known topic already has a valid name
        if topic is None:
            problem = check_new_topic(header.topic)
            if problem is not None:
                return request.response(ResponseCode.SYSTEM_ERROR, problem)
            topic = self.topics.create_on_send(
                header.topic, header.default_topic or "", header.default_topic_queue_nums or 4
            )
            if topic is None:
                return request.response(
                    ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist, apply first please!"
                )
        if not topic.writable:
            return request.response(ResponseCode.NO_PERMISSION, f"the topic[{header.topic}] sending is forbidden")
        queue_id = header.queue_id
        if queue_id < 0:
            queue_id = next(self._round_robin) % max(1, topic.write_queue_nums)
        elif queue_id >= topic.queue_count:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"request queueId[{queue_id}] is illegal, topic: {header.topic}"
            )
        return topic, queue_id

    def _prepare(self, request: RemotingCommand, msg: Message) -> RemotingCommand | defer.Deferred:
        """A transaction's half message: stored out of its topic's sight until END_TRANSACTION."""
        if self.transactions is None or self.config.reject_transaction_message:
            return request.response(
                ResponseCode.NO_PERMISSION, f"the broker[{self.config.advertised_host}] sending transaction message is forbidden"
            )
        if len(msg.body) > self.config.max_message_size:
            return self._too_large(request)
        real_queue = msg.queue_id
        self.transactions.prepared()
        return when_stored(self.store.put(to_half(msg)), lambda req, result: _answer_prepared(req, result, real_queue), request)

    def _answer(self, request: RemotingCommand, result: PutResult) -> RemotingCommand:
        if result.ok and self.on_put is not None:
            messages = result.messages
            first = messages[0]
            delayed = first.topic == SCHEDULE_TOPIC
            topic = first.properties.get("REAL_TOPIC") if delayed else first.topic
            size = first.store_size if len(messages) == 1 else sum(m.store_size for m in messages)
            self.on_put(topic or "", len(messages), size, delayed)
        return answer_put(request, result)

    def _too_large(self, request: RemotingCommand) -> RemotingCommand:
        return request.response(
            ResponseCode.MESSAGE_ILLEGAL, f"the message body size over max value, MAX: {self.config.max_message_size}"
        )
