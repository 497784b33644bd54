"""The broker statistics mqadmin reads (docs/protocol.md, Codes rmqproxy answers): one stats item
over its three windows (VIEW_BROKER_STATS_DATA, 315, ``statsAll``) and the consume stats of every
group (GET_BROKE_CONSUME_STATS, 317, ``brokerConsumeStats``), built as the reference builds them.
"""

from __future__ import annotations

from codec.bodies import BrokerStatsData, BrokerStatsItem, ConsumeStats, ConsumeStatsList, MessageQueue, OffsetWrapper
from codec.codes import RequestCode, ResponseCode
from codec.command import RemotingCommand

from ..brokerstats import BrokerStats, Snapshot
from ..clients import ClientRegistry
from ...core.config import Config
from ...net.dispatch import Route
from ..store import MessageStore
from ..topics import TopicTable


def _item(snapshot: Snapshot) -> BrokerStatsItem:
    return BrokerStatsItem(snapshot.sum, snapshot.tps, snapshot.avgpt)


class StatsProcessor:
    def __init__(
        self, config: Config, store: MessageStore, topics: TopicTable, clients: ClientRegistry, stats: BrokerStats,
    ) -> None:  # fmt: skip
        self.config = config
        self.store = store
        self.topics = topics
        self.clients = clients
        self.stats = stats

    def routes(self) -> list[Route]:
        """This processor's entries of the dispatch table."""
        return [
            Route(RequestCode.VIEW_BROKER_STATS_DATA, self.view_stats),
            Route(RequestCode.GET_BROKE_CONSUME_STATS, self.consume_stats_of_all),
        ]

    def view_stats(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        item = self.stats.item(header.stats_name, header.stats_key)
        if item is None:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"The stats <{header.stats_name}> <{header.stats_key}> not exist"
            )
        body = BrokerStatsData(_item(item.in_minute()), _item(item.in_hour()), _item(item.in_day()))
        return request.response(ResponseCode.SUCCESS, body=body.to_json())

    def _known_groups(self) -> list[str]:
        """The groups 317 reports: every group with offsets or online consumers."""
        return sorted({g for (g, _t, _q) in self.store.offsets.table()} | set(self.clients.consumers))

    def consume_stats_of_all(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        """Per group, each topic it has offsets on (left out: a topic gone, one outside the group's
        subscriptions when it has some, and with ``isOrder`` one not ordered), over its write queues."""
        by_group = {}
        for group, topic, _queue in self.store.offsets.table():
            by_group.setdefault(group, set()).add(topic)
        listed = []
        total_diff = total_inflight = 0
        for group in self._known_groups():
            online = self.clients.consumer_group(group)
            subscriptions = online.subscriptions if online is not None else {}
            stats_list = []
            for name in sorted(by_group.get(group, ())):
                topic = self.topics.get(name)
                if topic is None or (header.is_order and not topic.order):
                    continue
                if subscriptions and name not in subscriptions:
                    continue
                table = {}
                for queue_id in range(topic.write_queue_nums):
                    committed, pulled = self.store.offsets.progress(group, name, queue_id)
                    committed = max(0, committed)
                    last = self.store.message_at(name, queue_id, committed - 1) if committed > 0 else None
                    wrapper = OffsetWrapper(self.store.max_offset(name, queue_id), committed, max(pulled, committed),
                                            last.store_timestamp if last else 0)  # fmt: skip
                    table[MessageQueue(name, self.config.broker_name, queue_id)] = wrapper
                    total_diff += wrapper.broker_offset - wrapper.consumer_offset
                    total_inflight += wrapper.pull_offset - wrapper.consumer_offset
                stats_list.append(ConsumeStats(table, self.stats.group_get_tps(group, name)))
            listed.append({group: stats_list})
        body = ConsumeStatsList(listed, self.config.advertised_address, total_diff, total_inflight)
        return request.response(ResponseCode.SUCCESS, body=body.to_json())
