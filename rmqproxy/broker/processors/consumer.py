"""Clients and offsets: HEART_BEAT, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP, the consumer
offset codes and the queue offset queries (docs/protocol.md: Heartbeats and groups, Consumer offsets).

Membership changes notify every remaining member of the group with NOTIFY_CONSUMER_IDS_CHANGED
(oneway), so they rebalance at once instead of on their 20 s tick.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from twisted.internet import defer
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from codec.bodies import GetConsumerListByGroupResponseBody, HeartbeatData
from codec.codes import RequestCode, ResponseCode
from codec.command import RemotingCommand
from codec.headers import (
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetResponseHeader,
    NotifyConsumerIdsChangedRequestHeader,
    QueryConsumerOffsetResponseHeader,
    SearchOffsetResponseHeader,
)

from ..clients import ClientInfo, ClientRegistry, valid_heartbeat
from ...net.dispatch import Route
from ..relay import V3_0_7_SNAPSHOT
from ..store import MessageStore
from ..subgroups import SubscriptionGroupTable
from ..topics import TopicTable
from ...core.names import check_group_name, retry_topic

log = Logger()

HEARTBEAT_SLICE = 100  # groups a heartbeat registers per reactor turn


class ConsumerProcessor:
    def __init__(
        self,
        store: MessageStore,
        topics: TopicTable,
        clients: ClientRegistry,
        clock: IReactorTime,
        *,
        groups: SubscriptionGroupTable,
    ) -> None:
        self.store = store
        self.groups = groups
        self.topics = topics
        self.clients = clients
        self.clock = clock
        self.on_unregister: Callable[[str, str | None], None] | None = None

    def routes(self) -> list[Route]:
        """This processor's entries of the dispatch table."""
        return [
            Route(RequestCode.HEART_BEAT, self.heartbeat),
            Route(RequestCode.UNREGISTER_CLIENT, self.unregister),
            Route(RequestCode.GET_CONSUMER_LIST_BY_GROUP, self.consumer_list),
            Route(RequestCode.QUERY_CONSUMER_OFFSET, self.query_offset),
            Route(RequestCode.UPDATE_CONSUMER_OFFSET, self.update_offset),
            Route(RequestCode.GET_MAX_OFFSET, self.max_offset),
            Route(RequestCode.GET_MIN_OFFSET, self.min_offset),
            Route(RequestCode.GET_EARLIEST_MSG_STORETIME, self.earliest_time),
            Route(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, self.search_offset),
        ]

    # --- clients ----------------------------------------------------------------------------

    def heartbeat(self, request: RemotingCommand, header, conn) -> RemotingCommand | defer.Deferred:
        """Register the heartbeat's groups. A heartbeat naming more than ``HEARTBEAT_SLICE`` groups
        is registered a slice per reactor turn, answered once all are in, so other clients are
        served in between (2,000 groups in one heartbeat once held the reactor for seconds)."""
        data = valid_heartbeat(HeartbeatData.from_json(request.body))
        known = self.clients.client_of(conn)
        info = ClientInfo(
            data.client_id or (known.client_id if known is not None else ""),
            getattr(request.language, "name", str(request.language)), request.version, conn.remote,
            int(self.clock.seconds() * 1000),
        )  # fmt: skip
        consumers = data.consumer_data_set
        if len(consumers) <= HEARTBEAT_SLICE:
            self._register(conn, info, data)
            return request.response(ResponseCode.SUCCESS)
        done: defer.Deferred = defer.Deferred()

        def register_from(start: int) -> None:
            if not conn.connected:  # its groups were already dropped: register nothing more
                done.callback(None)
                return
            part = dataclasses.replace(data, consumer_data_set=consumers[start:start + HEARTBEAT_SLICE],
                                       producer_data_set=data.producer_data_set if start == 0 else [])  # fmt: skip
            self._register(conn, info, part)
            if start + HEARTBEAT_SLICE < len(consumers):
                self.clock.callLater(0, register_from, start + HEARTBEAT_SLICE)
            else:
                done.callback(request.response(ResponseCode.SUCCESS))

        register_from(0)
        return done

    def _register(self, conn, info: ClientInfo, data: HeartbeatData) -> None:
        """Each consumer's group is looked up (created on first use while auto-create is on) and
        its retry topic made with the group's ``retryQueueNums``; an unknown group that may not be
        created is still registered, without a retry topic, as 4.9.8 registers it (its pulls are
        refused). Members are told of changes unless the group turned ``notifyConsumerIdsChangedEnable`` off."""
        quiet = set()
        for consumer in data.consumer_data_set:
            config = self.groups.find(consumer.group_name)
            if config is None:
                continue
            if not config.notify_consumer_ids_changed_enable:
                quiet.add(consumer.group_name)
            if consumer.message_model != "BROADCASTING" and config.retry_queue_nums > 0:
                self.topics.ensure(retry_topic(consumer.group_name), config.retry_queue_nums)
        for group in self.clients.heartbeat(conn, info, data):
            if group not in quiet:
                self.notify_group(group)

    def unregister(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        if header.consumer_group and self.on_unregister is not None:
            self.on_unregister(header.client_id, header.consumer_group)
        for group in self.clients.unregister(conn, header.producer_group, header.consumer_group):
            config = self.groups.get(group)
            if config is None or config.notify_consumer_ids_changed_enable:
                self.notify_group(group)
        return request.response(ResponseCode.SUCCESS)

    def connection_closed(self, conn) -> None:
        for group in self.clients.connection_closed(conn):
            self.notify_group(group)

    def close_silent_clients(self, limit_s: float) -> None:
        """Close the connections that sent no heartbeat for ``limit_s`` (``channelExpiredTimeout``):
        the client is gone or cut off, and its groups must rebalance without it."""
        for conn in self.clients.silent_since(int((self.clock.seconds() - limit_s) * 1000)):
            if conn.connected:
                log.info("closing {conn}: no heartbeat for {limit} s", conn=conn, limit=limit_s)
                conn.close()

    def notify_group(self, group: str) -> None:
        """Tell every member of ``group`` that its membership changed."""
        notice = RemotingCommand(
            code=RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
            ext_fields=NotifyConsumerIdsChangedRequestHeader(consumer_group=group).to_ext(),
        )
        for member, info in self.clients.members(group):
            if info.version >= V3_0_7_SNAPSHOT or info.version == 0:
                member.send_oneway(notice)

    def consumer_list(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        group = self.clients.consumer_group(header.consumer_group)
        ids = group.client_ids() if group is not None else []
        if not ids:
            return request.response(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {header.consumer_group}")
        return request.response(
            ResponseCode.SUCCESS, ext_fields={}, body=GetConsumerListByGroupResponseBody(ids).to_json()
        )

    # --- offsets ----------------------------------------------------------------------------

    def query_offset(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        """The committed offset; without one (none stored, or a negative one) 0 for a queue that
        still starts at 0 with its first message in memory, else QUERY_NOT_FOUND (4.9.8's
        ``queryConsumerOffset``); a 5.x client asking ``setZeroIfNotFound=false`` never gets 0."""
        offset = self.store.offsets.query(header.consumer_group, header.topic, header.queue_id)
        if offset is None:
            if header.set_zero_if_not_found is False:
                return request.response(
                    ResponseCode.QUERY_NOT_FOUND, "Not found, do not set to zero, maybe this group boot first"
                )
            if self.store.min_offset(header.topic, header.queue_id) > 0 or self.store.in_disk(
                header.topic, header.queue_id, 0
            ):
                return request.response(
                    ResponseCode.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"
                )
            offset = 0
        ext = QueryConsumerOffsetResponseHeader(offset=offset).to_ext()
        return request.response(ResponseCode.SUCCESS, ext_fields=ext)

    def update_offset(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        """Store the commit as sent (a negative one then reads as none); an invalid group name or a
        topic this broker does not have is refused as 5.x refuses them, so the table only holds
        offsets of real topics under valid names."""
        if check_group_name(header.consumer_group) is not None:
            return request.response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"Group {header.consumer_group} not exist!"
            )
        if self.topics.get(header.topic) is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, f"Topic {header.topic} not exist!")
        self.store.offsets.commit(header.consumer_group, header.topic, header.queue_id, header.commit_offset)
        return request.response(ResponseCode.SUCCESS)

    def max_offset(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        offset = self.store.max_offset(header.topic, header.queue_id)
        return request.response(ResponseCode.SUCCESS, ext_fields=GetMaxOffsetResponseHeader(offset=offset).to_ext())

    def min_offset(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        offset = self.store.min_offset(header.topic, header.queue_id)
        return request.response(ResponseCode.SUCCESS, ext_fields=GetMinOffsetResponseHeader(offset=offset).to_ext())

    def earliest_time(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        when = self.store.earliest_message_time(header.topic, header.queue_id) or 0
        return request.response(
            ResponseCode.SUCCESS, ext_fields=GetEarliestMsgStoretimeResponseHeader(timestamp=when).to_ext()
        )

    def search_offset(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        offset = self.store.search_offset_by_timestamp(header.topic, header.queue_id, header.timestamp)
        return request.response(ResponseCode.SUCCESS, ext_fields=SearchOffsetResponseHeader(offset=offset).to_ext())
