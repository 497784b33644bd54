"""mqadmin's offset, producer and relay operations (docs/protocol.md, "Offsets and relays"):
INVOKE_BROKER_TO_RESET_OFFSET (pushed to online consumers as RESET_CONSUMER_CLIENT_OFFSET),
INVOKE_BROKER_TO_GET_CONSUMER_STATUS, CLONE_GROUP_OFFSET, GET_PRODUCER_CONNECTION_LIST,
CONSUME_MESSAGE_DIRECTLY (relayed to the named consumer) and QUERY_CONSUME_QUEUE.
"""

from __future__ import annotations

import dataclasses
import json

from twisted.internet import defer

from codec.bodies import (
    ClientConnection,
    ConsumeQueueData,
    GetConsumerStatusBody,
    MessageQueue,
    MessageQueueForC,
    ProducerConnection,
    QueryConsumeQueueResponseBody,
    ResetOffsetBody,
    ResetOffsetBodyForC,
)
from codec.codes import LanguageCode, RequestCode, ResponseCode
from codec.command import RemotingCommand
from codec.errors import CodecError, MessageError
from codec.headers import GetConsumerStatusRequestHeader, ResetOffsetRequestHeader
from codec.message import decode_offset_msg_id

from ..clients import ClientInfo, ClientRegistry
from ...core.config import Config
from ...net.dispatch import Route
from ..relay import V3_0_7_SNAPSHOT, call_consumer
from ..store import MessageStore
from ..topics import TopicTable
from ...core.names import check_group_name, check_name

CONSUMER_STATUS_TIMEOUT_S = 5.0  # Broker2Client.getConsumeStatus waits 5 s for each client
#: Entries one QUERY_CONSUME_QUEUE answers at most. The reference stops at the end of the file
#: holding ``index`` (300,000 entries, some 30 MB of JSON); rmqproxy stops there too, or here.
MAX_QUERY_CQ_ENTRIES = 1000


class OperationsProcessor:
    def __init__(self, config: Config, store: MessageStore, topics: TopicTable, clients: ClientRegistry) -> None:
        self.config = config
        self.store = store
        self.topics = topics
        self.clients = clients

    def routes(self) -> list[Route]:
        """This processor's entries of the dispatch table."""
        return [
            Route(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, self.reset_offset),
            Route(RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, self.consumer_status),
            Route(RequestCode.CLONE_GROUP_OFFSET, self.clone_group_offset),
            Route(RequestCode.GET_PRODUCER_CONNECTION_LIST, self.producer_connections),
            Route(RequestCode.CONSUME_MESSAGE_DIRECTLY, self.consume_message_directly),
            Route(RequestCode.QUERY_CONSUME_QUEUE, self.query_consume_queue),
        ]

    def _mq(self, topic: str, queue_id: int) -> MessageQueue:
        return MessageQueue(topic, self.config.broker_name, queue_id)

    def _online(self, group: str) -> list[tuple[object, ClientInfo]]:
        return [(conn, info) for conn, info in self.clients.members(group) if getattr(conn, "connected", False)]

    @staticmethod
    def _too_old(request: RemotingCommand, members: list[tuple[object, ClientInfo]]) -> RemotingCommand | None:
        """The reference's refusal when a member predates V3_0_7_SNAPSHOT, or None."""
        for _conn, info in members:
            if info.version < V3_0_7_SNAPSHOT:
                return request.response(
                    ResponseCode.SYSTEM_ERROR, f"the client does not support this feature. version={info.version}"
                )
        return None

    # --- INVOKE_BROKER_TO_RESET_OFFSET ------------------------------------------------------

    def reset_offset(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        """Offsets for ``timestamp`` (-1: the queue's end) on each queue, pushed to every online
        consumer of the group and stored; ``isForce=false`` only moves an offset back. A group
        with no online consumer gets 206, on which the tools update the offsets one by one. A
        5.x request naming a queue (``queueId`` >= 0, maybe an ``offset``) resets that queue."""
        topic, group = header.topic, header.group
        problem = check_name(topic) or check_group_name(group)
        if problem is not None:
            return request.response(ResponseCode.SYSTEM_ERROR, problem)
        config = self.topics.get(topic)
        if config is None:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"[reset-offset] reset offset failed, no topic in this broker. topic={topic}"
            )
        if header.queue_id is not None and header.queue_id >= 0:
            return self._reset_one_queue(request, header, config.queue_count)
        table: dict[MessageQueue, int] = {}
        for queue_id in range(config.write_queue_nums):
            current = self.store.offsets.query(group, topic, queue_id)
            if current is None:
                return request.response(ResponseCode.SYSTEM_ERROR, f"THe consumer group <{group}> not exist")
            wanted = max(0, self._offset_at(topic, queue_id, header.timestamp))
            table[self._mq(topic, queue_id)] = wanted if header.is_force or wanted < current else current
        members = self._online(group)
        if not members:
            return request.response(
                ResponseCode.CONSUMER_NOT_ONLINE,
                f"Consumer not online, so can not reset offset, Group: {group} Topic: {topic} "
                f"Timestamp: {header.timestamp}",
            )
        refused = self._too_old(request, members)
        if refused is not None:
            return refused
        return self._apply_reset(request, group, topic, header.timestamp, table, members)

    def _reset_one_queue(self, request: RemotingCommand, header, queue_count: int) -> RemotingCommand:
        topic, queue_id = header.topic, header.queue_id
        if queue_id >= queue_count:
            return request.response(ResponseCode.SYSTEM_ERROR, f"queueId {queue_id} of topic {topic} does not exist")
        if header.offset is not None and header.offset != -1:
            low, high = self.store.min_offset(topic, queue_id), self.store.max_offset(topic, queue_id)
            if not low <= header.offset <= high:
                return request.response(ResponseCode.SYSTEM_ERROR,
                                        f"Target offset {header.offset} not in consume queue range [{low}-{high}]")
            offset = header.offset
        else:
            offset = max(0, self._offset_at(topic, queue_id, header.timestamp))
        members = self._online(header.group)
        refused = self._too_old(request, members)
        if refused is not None:
            return refused
        table = {self._mq(topic, queue_id): offset}
        return self._apply_reset(request, header.group, topic, header.timestamp, table, members)

    def _offset_at(self, topic: str, queue_id: int, timestamp: int) -> int:
        if timestamp < 0:
            return self.store.max_offset(topic, queue_id)
        return self.store.search_offset_by_timestamp(topic, queue_id, timestamp)

    def _apply_reset(self, request: RemotingCommand, group: str, topic: str, timestamp: int,
                     table: dict[MessageQueue, int], members: list[tuple[object, ClientInfo]]) -> RemotingCommand:
        """Store ``table``, push it to ``members`` (RESET_CONSUMER_CLIENT_OFFSET, oneway), answer it."""
        for mq, offset in table.items():
            self.store.offsets.commit(group, topic, mq.queue_id, offset)
        body = ResetOffsetBody(table).to_json()
        if request.language == LanguageCode.CPP:  # mqadmin -c: the C++ client's list form
            pushed = ResetOffsetBodyForC(
                [MessageQueueForC(mq.topic, mq.broker_name, mq.queue_id, offset) for mq, offset in table.items()]
            ).to_json()
        else:
            pushed = body
        push = RemotingCommand(
            code=RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
            ext_fields=ResetOffsetRequestHeader(topic=topic, group=group, timestamp=timestamp, is_force=False).to_ext(),
            body=pushed,
        )
        for member, _info in members:
            member.send_oneway(push)
        return request.response(ResponseCode.SUCCESS, body=body)

    # --- INVOKE_BROKER_TO_GET_CONSUMER_STATUS -----------------------------------------------

    def consumer_status(self, request: RemotingCommand, header, conn) -> RemotingCommand | defer.Deferred:
        """Each online client's queue offsets for the topic (GET_CONSUMER_STATUS_FROM_CLIENT), by
        client id; ``clientAddr``, when given, names the one client to ask. A client that does
        not answer in 5 s, or answers an error, is left out."""
        members = self._online(header.group)
        if not members:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"No Any Consumer online in the consumer group: [{header.group}]"
            )
        refused = self._too_old(request, members)
        if refused is not None:
            return refused
        if header.client_addr:
            members = [(c, i) for c, i in members if i.client_id == header.client_addr][:1]
        ext = GetConsumerStatusRequestHeader(topic=header.topic, group=header.group).to_ext()
        asked = [
            member.request(RemotingCommand(code=RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, ext_fields=dict(ext)),
                           CONSUMER_STATUS_TIMEOUT_S)
            for member, _info in members
        ]  # fmt: skip

        def answer(results: list[tuple[bool, RemotingCommand]]) -> RemotingCommand:
            table = {}
            for (ok, reply), (_member, info) in zip(results, members):
                if not ok or reply.code != ResponseCode.SUCCESS or not reply.body:
                    continue
                try:
                    table[info.client_id] = GetConsumerStatusBody.from_json(reply.body).message_queue_table
                except CodecError:
                    continue  # the reference logs a body it cannot read and goes on
            return request.response(ResponseCode.SUCCESS, body=GetConsumerStatusBody(consumer_table=table).to_json())

        return defer.DeferredList(asked, consumeErrors=True).addCallback(answer)

    # --- CLONE_GROUP_OFFSET -----------------------------------------------------------------

    def clone_group_offset(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        """Copy the source group's commits on ``topic`` (blank: each topic it has commits on) to
        the destination group. Unless ``offline``, a topic the online source group does not
        subscribe to (when it subscribes to any) is skipped, as is a topic this broker lacks."""
        problem = check_group_name(header.src_group) or check_group_name(header.dest_group)
        if problem is None and header.topic:
            problem = check_name(header.topic)
        if problem is not None:
            return request.response(ResponseCode.SYSTEM_ERROR, problem)
        if header.topic:
            topics = [header.topic]
        else:
            topics = sorted(self.store.offsets.topics_of(header.src_group))
        source = self.clients.consumer_group(header.src_group)
        subscribed = source.subscriptions if source is not None and self._online(header.src_group) else {}
        for topic in topics:
            if self.topics.get(topic) is None:
                continue
            if not header.offline and subscribed and topic not in subscribed:
                continue
            self.store.offsets.clone(header.src_group, header.dest_group, topic)
        return request.response(ResponseCode.SUCCESS)

    # --- GET_PRODUCER_CONNECTION_LIST -------------------------------------------------------

    def producer_connections(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        members = self.clients.producer_group(header.producer_group)
        if not members:
            return request.response(ResponseCode.SYSTEM_ERROR, f"the producer group[{header.producer_group}] not exist")
        body = ProducerConnection([ClientConnection(i.client_id, i.remote, i.language, i.version) for i in members])
        return request.response(ResponseCode.SUCCESS, body=body.to_json())

    # --- CONSUME_MESSAGE_DIRECTLY -----------------------------------------------------------

    def consume_message_directly(self, request: RemotingCommand, header, conn) -> RemotingCommand | defer.Deferred:
        """The message named by its offset id, relayed with the request's fields (and this
        broker's name) to the named client of the group; its ConsumeMessageDirectlyResult, or
        why there is none, is the answer."""
        try:
            _host, phys = decode_offset_msg_id(header.msg_id or "")
        except MessageError as exc:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"msgId {header.msg_id!r:.80} is not an offset message id: {exc}"
            )
        record = self.store.read_record(phys)
        if record is None:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"can not find message by the offset id {header.msg_id}"
            )
        fields = {"broker_name": self.config.broker_name}
        topic = self.topics.get(header.topic) if header.topic else None
        if topic is not None:
            fields["topic_sys_flag"] = topic.topic_sys_flag
        ext = dataclasses.replace(header, **fields).to_ext()
        forward = RemotingCommand(code=RequestCode.CONSUME_MESSAGE_DIRECTLY, ext_fields=ext, body=record)
        return call_consumer(self.clients, request, header.consumer_group, header.client_id, forward)

    # --- QUERY_CONSUME_QUEUE ----------------------------------------------------------------

    def query_consume_queue(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        """``count`` entries (at most MAX_QUERY_CQ_ENTRIES, and not past the file holding
        ``index``) of one consume queue from ``index``, its bounds, and with a group the group's
        subscription of the topic."""
        topic, queue_id = header.topic or "", header.queue_id
        problem = check_name(topic)
        if problem is not None:
            return request.response(ResponseCode.SYSTEM_ERROR, problem)
        config = self.topics.get(topic)
        known = (config is not None and 0 <= queue_id < config.queue_count) or (topic, queue_id) in self.store.queues()
        if not known:
            return request.response(ResponseCode.SYSTEM_ERROR, f"{queue_id}@{topic} is not exist!")
        body = QueryConsumeQueueResponseBody(max_queue_index=self.store.max_offset(topic, queue_id),
                                             min_queue_index=self.store.min_offset(topic, queue_id))  # fmt: skip
        if header.consumer_group is not None:
            group = self.clients.consumer_group(header.consumer_group)
            online = group is not None and bool(self._online(header.consumer_group))
            sub = group.subscriptions.get(topic) if online else None
            body.subscription_data = sub
            body.filter_data = f"{header.consumer_group}@{topic} is not online!" if sub is None else _filter_data(
                header.consumer_group, topic, sub
            )
        if not body.min_queue_index <= header.index < body.max_queue_index:
            body.queue_data = []
            return request.response(
                ResponseCode.SUCCESS, f"Index {header.index} of {queue_id}@{topic} is not exist!", body=body.to_json()
            )
        entries = self.store.queue_entries(topic, queue_id, header.index, min(header.count, MAX_QUERY_CQ_ENTRIES))
        body.queue_data = [ConsumeQueueData(phys, size, tags_code) for phys, size, tags_code in entries]
        return request.response(ResponseCode.SUCCESS, body=body.to_json())


def _filter_data(group: str, topic: str, sub) -> str:
    """What the reference's ``ConsumerFilterData`` shows: none (``null``) for a tag
    subscription; for SQL92 the expression it filters by."""
    kind = sub.expression_type or "TAG"
    if kind == "TAG":
        return "null"
    return json.dumps({"consumerGroup": group, "topic": topic, "expression": sub.sub_string, "expressionType": kind,
                       "clientVersion": sub.sub_version or 0}, indent="\t")  # fmt: skip
