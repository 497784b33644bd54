"""What mqadmin and the client's admin calls need (docs/protocol.md, Codes rmqproxy answers): message views and
queries, topic create/delete, topic and consume stats, runtime info, connections, and
GET_CONSUMER_RUNNING_INFO forwarded to the consumer itself.
"""

from __future__ import annotations


from twisted.internet import defer

from codec.bodies import (
    CheckClientRequestBody,
    ClientConnection,
    ConsumerConnection,
    ConsumeStats,
    GroupList,
    KVTable,
    MessageQueue,
    OffsetWrapper,
    TopicConfigAndQueueMapping,
    TopicOffset,
    TopicStatsTable,
)
from codec.codes import RequestCode, ResponseCode
from codec.command import RemotingCommand
from codec.headers import GetBrokerConfigResponseHeader, GetConsumerRunningInfoRequestHeader, QueryMessageResponseHeader

from ... import __version__
from ..brokerstats import FOUND, MISSED, PUTS, TRANSFERRED, BrokerStats, human_bytes, java_double, java_fixed
from ..clients import ClientRegistry
from ...core.config import SETTINGS, Config, java_text
from ...net.dispatch import Route
from ..relay import call_consumer
from ..sql92 import SelectorError, compile_selector
from ..store import MessageStore, used_ratio
from ..topics import AttributeRefused, TopicConfig, TopicTable, alter_attributes
from ...core.names import check_new_topic
from .clean import destroy_queues, in_use

MAX_QUERY_MESSAGES = 64  # a QUERY_MESSAGE answers at most this many (the reference's maxMsgsNumBatch)
JAVA_INT_MAX = str(2**31 - 1)  # remainTransientStoreBufferNumbs of a broker without a transient store pool


class AdminProcessor:
    def __init__(
        self, config: Config, store: MessageStore, topics: TopicTable, clients: ClientRegistry,
        stats: BrokerStats | None = None,
    ) -> None:  # fmt: skip
        self.config = config
        self.stats = stats  # the broker statistics: consumeTps, the runtime info's rates and day totals
        self.store = store
        self.topics = topics
        self.clients = clients
        self.clock = store.clock  # the server's injected clock (the reactor's, or task.Clock in tests)
        self.started_ms = int(self.clock() * 1000)

    def routes(self) -> list[Route]:
        """This processor's entries of the dispatch table."""
        return [
            Route(RequestCode.VIEW_MESSAGE_BY_ID, self.view_message),
            Route(RequestCode.QUERY_MESSAGE, self.query_message),
            Route(RequestCode.UPDATE_AND_CREATE_TOPIC, self.create_topic),
            Route(RequestCode.DELETE_TOPIC_IN_BROKER, self.delete_topic),
            Route(RequestCode.GET_TOPIC_STATS_INFO, self.topic_stats),
            Route(RequestCode.GET_TOPIC_CONFIG, self.topic_config),
            Route(RequestCode.GET_CONSUME_STATS, self.consume_stats),
            Route(RequestCode.GET_BROKER_RUNTIME_INFO, self.runtime_info),
            Route(RequestCode.GET_BROKER_CONFIG, self.broker_config),
            Route(RequestCode.GET_CONSUMER_CONNECTION_LIST, self.consumer_connections),
            Route(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, self.consumed_by),
            Route(RequestCode.CHECK_CLIENT_CONFIG, self.check_client_config),
            Route(RequestCode.GET_CONSUMER_RUNNING_INFO, self.consumer_running_info),
        ]

    def view_message(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        record = self.store.read_record(header.offset)
        if record is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {header.offset}")
        return request.response(ResponseCode.SUCCESS, body=record)

    def query_message(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        records = self.store.query_by_key(
            header.topic, header.key, min(max(1, header.max_num), MAX_QUERY_MESSAGES), header.begin_timestamp,
            header.end_timestamp,
        )
        ext = QueryMessageResponseHeader(
            index_last_update_timestamp=int(self.clock() * 1000),
            index_last_update_phyoffset=self.store.max_physical_offset,
        ).to_ext()
        if not records:
            return request.response(
                ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct", ext
            )
        return request.response(ResponseCode.SUCCESS, ext_fields=ext, body=b"".join(records))

    def create_topic(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        problem = check_new_topic(header.topic)
        if problem is not None:
            return request.response(ResponseCode.SYSTEM_ERROR, problem)
        if header.topic in self.topics.system_topics:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"The topic[{header.topic}] is conflict with system topic."
            )
        existing = self.topics.get(header.topic)
        try:
            attributes = alter_attributes(existing.attributes if existing else (), header.attributes,
                                          creating=existing is None)  # fmt: skip
        except AttributeRefused as refused:
            return request.response(refused.code, refused.remark)
        most = self.config.max_topic_queue_nums
        if not (1 <= header.read_queue_nums <= most and 1 <= header.write_queue_nums <= most):
            return request.response(
                ResponseCode.SYSTEM_ERROR,
                f"readQueueNums and writeQueueNums must be within [1, {most}] (maxTopicQueueNums), not "
                f"{header.read_queue_nums} and {header.write_queue_nums}",
            )
        self.topics.put(
            TopicConfig(header.topic, header.read_queue_nums, header.write_queue_nums, header.perm,
                        header.topic_sys_flag or 0, bool(header.order), attributes)
        )  # fmt: skip
        return request.response(ResponseCode.SUCCESS)

    def delete_topic(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        """Forget the topic, its offsets and statistics, and destroy its consume queues, as the
        reference's cleanUnusedTopic does then: left on disk, a restart would bring it back."""
        self.topics.delete(header.topic)
        self.store.offsets.remove_topic(header.topic)
        if self.stats is not None:
            self.stats.forget_topic(header.topic)
        if not in_use(self.topics, header.topic):
            problem = destroy_queues(self.store, [(t, q) for t, q in self.store.queues() if t == header.topic])
            if problem is not None:
                return request.response(ResponseCode.SYSTEM_ERROR, problem)
        return request.response(ResponseCode.SUCCESS)

    def topic_config(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        topic = self.topics.get(header.topic)
        if topic is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {header.topic}")
        body = TopicConfigAndQueueMapping(
            topic.name, topic.read_queue_nums, topic.write_queue_nums, topic.perm, "SINGLE_TAG",
            topic.topic_sys_flag, topic.order, dict(topic.attributes),
        )  # fmt: skip
        return request.response(ResponseCode.SUCCESS, body=body.to_json())

    def topic_stats(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        topic = self.topics.get(header.topic)
        if topic is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist")
        table = {}
        for queue_id in range(topic.write_queue_nums):
            high = self.store.max_offset(header.topic, queue_id)
            last = self.store.message_at(header.topic, queue_id, high - 1) if high > 0 else None
            table[MessageQueue(header.topic, self.config.broker_name, queue_id)] = TopicOffset(
                self.store.min_offset(header.topic, queue_id), high, last.store_timestamp if last else 0
            )
        return request.response(ResponseCode.SUCCESS, body=TopicStatsTable(table).to_json())

    def consume_stats(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        """Every read queue of the asked topic, or of each topic the group has offsets on or
        subscribes to; a topic outside the subscriptions of a group that has some is left out,
        as the reference leaves it out. Offsets as ``ConsumerOffsets.progress`` gives them."""
        group = header.consumer_group
        subscribed = self.clients.consumer_group(group)
        subscriptions = subscribed.subscriptions if subscribed is not None else {}
        if header.topic:
            topic_names = [header.topic]
        else:
            topic_names = sorted({t for (g, t, _q) in self.store.offsets.table() if g == group} | set(subscriptions))
        table = {}
        consume_tps = 0.0
        for name in topic_names:
            topic = self.topics.get(name)
            if topic is None or (subscriptions and name not in subscriptions):
                continue
            if self.stats is not None:  # as the reference: GROUP_GET_NUMS of topic@group in the last minute
                consume_tps += self.stats.group_get_tps(group, name)
            for queue_id in range(topic.read_queue_nums):
                committed, pulled = self.store.offsets.progress(group, name, queue_id)
                last = self.store.message_at(name, queue_id, committed - 1) if committed > 0 else None
                table[MessageQueue(name, self.config.broker_name, queue_id)] = OffsetWrapper(
                    self.store.max_offset(name, queue_id), committed, pulled, last.store_timestamp if last else 0
                )
        return request.response(ResponseCode.SUCCESS, body=ConsumeStats(table, consume_tps).to_json())

    def runtime_info(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        """Every key of a 4.9.7 broker's runtime table, from what the store and ``BrokerStats``
        measure; the few rmqproxy has no counterpart for are fixed (docs/operations.md, Statistics)."""
        table = {
            "brokerVersionDesc": "V4_9_8",
            "brokerVersion": "409",
            "rmqproxyVersion": __version__,
            "brokerActive": "true",  # 5.x: a master always serves
            **self._store_runtime(),
            **self._request_runtime(),
            "startAcceptSendRequestTimeStamp": "0",  # sends are taken from start: the reference's default
            "remainTransientStoreBufferNumbs": JAVA_INT_MAX,
        }
        stats = self.stats
        if stats is not None:
            transferred = stats.store_tps(TRANSFERRED)
            table.update({
                "msgPutTotalTodayMorning": str(stats.put_today_morning),
                "msgGetTotalTodayMorning": str(stats.get_today_morning),
                "msgPutTotalYesterdayMorning": str(stats.put_yesterday_morning),
                "msgGetTotalYesterdayMorning": str(stats.get_yesterday_morning),
                "getMessageEntireTimeMax": str(stats.longest_pull_ms),
                "putTps": stats.store_tps(PUTS),
                "getFoundTps": stats.store_tps(FOUND),
                "getMissTps": stats.store_tps(MISSED),
                "getTotalTps": stats.get_total_tps(),
                "getTransferedTps": transferred,  # 4.x tools read this spelling,
                "getTransferredTps": transferred,  # 5.x tools this one
            })
        return request.response(ResponseCode.SUCCESS, body=KVTable(table).to_json())

    def _store_runtime(self) -> dict[str, str]:
        """The runtime keys of the reference's store (``DefaultMessageStore``, ``StoreStatsService``)
        and the broker's own store figures."""
        store = self.store
        up_ms = max(0, int(self.clock() * 1000) - self.started_ms)
        days, rest = divmod(up_ms // 1000, 86400)
        earliest = store.look_message(store.min_physical_offset)
        put_times = store.put_times
        commitlog_ratio = used_ratio(store.commitlog_dir)
        total, usable = store.disk_space()
        table = {
            "bootTimestamp": str(self.started_ms),
            "runtime": f"[ {days} days, {rest // 3600} hours, {rest % 3600 // 60} minutes, {rest % 60} seconds ]",
            "putMessageEntireTimeMax": str(put_times.longest()),
            "putMessageTimesTotal": str(store.put_count),
            "putMessageFailedTimes": str(store.put_failed),
            "putMessageSizeTotal": str(store.put_bytes),
            "putMessageDistributeTime": put_times.distribution(),
            "putMessageAverageSize": java_double(store.put_bytes / max(1, store.put_count)),
            "dispatchMaxBuffer": "0",  # the reference never sets it either
            "putLatency99": java_fixed(put_times.percentile(0.99), 2),
            "putLatency999": java_fixed(put_times.percentile(0.999), 2),
            f"commitLogDiskRatio_{store.commitlog_dir}": java_double(commitlog_ratio),
            "commitLogDiskRatio": java_double(commitlog_ratio),
            "consumeQueueDiskRatio": java_double(used_ratio(store.consumequeue_dir)),
            "commitLogMinOffset": str(store.min_physical_offset),
            "commitLogMaxOffset": str(store.max_physical_offset),
            "msgPutTotalTodayNow": str(store.put_count),
            "msgGetTotalTodayNow": str(store.get_count),
            "dispatchBehindBytes": str(store.dispatch_behind_bytes),
            "pageCacheLockTimeMills": "0",  # appends run on the reactor: none is under way while this is answered
            "earliestMessageTimeStamp": str(earliest.store_timestamp if earliest else -1),
            "remainHowManyDataToFlush": human_bytes(store.unflushed_bytes),
            "commitLogDirCapacity": f"Total : {human_bytes(total)}, Free : {human_bytes(usable)}.",
        }
        for level, (delivered, end) in store.delay_progress().items():
            table[f"scheduleMessageOffset_{level}"] = f"{delivered},{end}"
        return table

    def _request_runtime(self) -> dict[str, str]:
        """The reference's thread-pool figures. rmqproxy has no pools: each request is handled on
        the reactor as soon as it is read, so no queue ever holds one; what bounds the requests a
        client may have waiting (held pulls, SYNC_FLUSH sends) is maxInFlightRequestsPerConnection,
        past which it gets SYSTEM_BUSY, as a full pool queue answers on the reference."""
        capacity = str(self.config.max_in_flight_requests_per_connection)
        table = {"EndTransactionQueueSize": "0", "EndTransactionThreadPoolQueueCapacity": capacity}
        for pool in ("send", "pull", "query"):
            table[f"{pool}ThreadPoolQueueSize"] = "0"
            table[f"{pool}ThreadPoolQueueCapacity"] = capacity
            table[f"{pool}ThreadPoolQueueHeadWaitTimeMills"] = "0"
        return table

    def broker_config(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        lines = [f"{s.key}={java_text(getattr(self.config, s.field))}" for s in SETTINGS]
        ext = GetBrokerConfigResponseHeader(version=f"rmqproxy-{__version__}").to_ext()
        return request.response(ResponseCode.SUCCESS, ext_fields=ext, body="\n".join(lines).encode())

    def consumer_connections(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        group = self.clients.consumer_group(header.consumer_group)
        if group is None or not group.members:
            return request.response(
                ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{header.consumer_group}] not online"
            )
        body = ConsumerConnection(
            [ClientConnection(i.client_id, i.remote, i.language, i.version) for i in group.members.values()],
            dict(group.subscriptions), group.consume_type, group.message_model, group.consume_from_where,
        )  # fmt: skip
        return request.response(ResponseCode.SUCCESS, body=body.to_json())

    def consumed_by(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        groups = set(self.clients.groups_subscribed_to(header.topic)) | self.store.offsets.groups_of(header.topic)
        return request.response(ResponseCode.SUCCESS, body=GroupList(sorted(groups)).to_json())

    def check_client_config(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        """A starting consumer asks whether its subscription is served: a tag filter always; an
        SQL92 one when ``enablePropertyFilter`` is on and it compiles (else 23, and the
        consumer's ``start()`` fails, rather than every pull)."""
        body = CheckClientRequestBody.from_json(request.body) if request.body else CheckClientRequestBody()
        sub = body.subscription_data
        kind = (sub.expression_type if sub is not None else None) or "TAG"
        if kind == "TAG":
            return request.response(ResponseCode.SUCCESS)
        if kind != "SQL92" or not self.config.enable_property_filter:
            return request.response(ResponseCode.SYSTEM_ERROR, f"The broker does not support consumer to filter message by {kind}")
        try:
            compile_selector(sub.sub_string or "")
        except SelectorError as exc:
            return request.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"Invalid MessageSelector. {exc}")
        return request.response(ResponseCode.SUCCESS)

    def consumer_running_info(self, request: RemotingCommand, header, conn) -> RemotingCommand | defer.Deferred:
        forward = RemotingCommand(
            code=RequestCode.GET_CONSUMER_RUNNING_INFO,
            ext_fields=GetConsumerRunningInfoRequestHeader(
                consumer_group=header.consumer_group, client_id=header.client_id,
                jstack_enable=bool(header.jstack_enable),
            ).to_ext(),
        )  # fmt: skip
        return call_consumer(self.clients, request, header.consumer_group, header.client_id, forward)
