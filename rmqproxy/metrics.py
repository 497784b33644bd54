"""Every Prometheus metric rmqproxy exports is defined here and only here (DESIGN.md, Metrics).

Three kinds:
- ``rmqproxy_*``: what no RocketMQ component measures — pull latency split into hold and service
  time, wake reasons, timeout overshoot, locks, flushes. Seconds, base units, ``_total`` counters.
- RocketMQ 5.x broker names with their exact units and labels (``BrokerMetricsConstant``,
  ``RemotingMetricsConstant`` of 5.3.1), so dashboards built for a 5.x broker work unchanged.
- The client view: what consumers report in GET_CONSUMER_RUNNING_INFO, under rocketmq-exporter's
  names and labels (``clientAddr``, ``clientId``, ``group``, ``topic``).

Live state (held pulls, locked queues, lag, connections) is read from the owning tables at scrape
time by a custom collector, never kept in inc/dec gauges that drift. Everything is registered on
a passed-in ``CollectorRegistry``. Label cardinality is bounded: past ``max_label_values``
distinct topics (or groups) new ones are reported as ``_other``; retry and DLQ topics all report
as ``%RETRY%`` and ``%DLQ%``. ``/metrics`` is a Twisted ``Resource`` rendering in the reactor
thread, so collectors read the tables without locks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from twisted.web.resource import Resource

from codec.bodies import ConsumerRunningInfo
from codec.codes import code_name

from .hold import WAKE_TIMEOUT
from .holdlog import PullEvent

#: Seconds; from 0.5 ms (a local read) to 30 s (past the Java client's pull timeout).
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 20, 30)
OVERSHOOT_BUCKETS = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5)
#: ``rocketmq_rpc_latency`` buckets in ms, as RemotingMetricsManager (5.3.1) declares them.
RPC_LATENCY_BUCKETS_MS = (1, 3, 5, 7, 10, 100, 1000, 2000, 3000)
COMMON = ("cluster", "node_type", "node_id")
CLIENT_LABELS = ("clientAddr", "clientId", "group", "topic")

OTHER = "_other"


class LabelLimiter:
    """Maps topic and group names to label values with a bounded number of distinct values."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.seen: set[str] = set()

    def __call__(self, name: str) -> str:
        if name.startswith("%RETRY%"):
            return "%RETRY%"
        if name.startswith("%DLQ%"):
            return "%DLQ%"
        if name in self.seen:
            return name
        if len(self.seen) < self.limit:
            self.seen.add(name)
            return name
        return OTHER


SYSTEM_TOPICS = frozenset({"TBW102", "SCHEDULE_TOPIC_XXXX", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT"})


def is_system_topic(topic: str) -> str:
    """``is_system`` label value, as RocketMQ's TopicValidator decides it."""
    return "true" if topic in SYSTEM_TOPICS or topic.startswith("rmq_sys_") else "false"


class Metrics:
    """The metric objects, and the hooks that feed them from pull events and requests."""

    def __init__(
        self, registry: CollectorRegistry, *, cluster: str, node_id: str, max_label_values: int = 500
    ) -> None:
        self.registry = registry
        self.common = (cluster, "broker", node_id)
        self.topic_label = LabelLimiter(max_label_values)
        self.group_label = LabelLimiter(max_label_values)
        self.pull_latency = Histogram(
            "rmqproxy_pull_latency_seconds", "Pull request to answer, held or not (what clients see, less network).",
            ["topic", "consumer_group", "code", "held"], buckets=LATENCY_BUCKETS, registry=registry,
        )  # fmt: skip
        self.pull_hold = Histogram(
            "rmqproxy_pull_hold_seconds", "Time a pull spent held, by what ended the hold.",
            ["topic", "consumer_group", "wake"], buckets=LATENCY_BUCKETS, registry=registry,
        )  # fmt: skip
        self.pull_service = Histogram(
            "rmqproxy_pull_service_seconds", "Time spent reading and answering a pull, outside any hold.",
            ["topic", "consumer_group"], buckets=LATENCY_BUCKETS, registry=registry,
        )  # fmt: skip
        self.hold_overshoot = Histogram(
            "rmqproxy_pull_hold_overshoot_seconds", "Timeout wakes: actual hold minus the requested suspend time.",
            buckets=OVERSHOOT_BUCKETS, registry=registry,
        )  # fmt: skip
        self.wakeups = Counter(
            "rmqproxy_hold_wakeups_total", "Held pulls ended, by reason.", ["topic", "consumer_group", "wake"],
            registry=registry,
        )  # fmt: skip
        self.lock_handoff = Histogram(
            "rmqproxy_lock_handoff_seconds", "Queue lock released by one client until granted to the next.",
            ["consumer_group"], buckets=LATENCY_BUCKETS + (31, 60, 120), registry=registry,
        )  # fmt: skip
        self.store_flush = Histogram(
            "rmqproxy_store_flush_seconds", "Commit-log fsync duration.", buckets=LATENCY_BUCKETS, registry=registry
        )
        self.client_stats_failures = Counter(
            "rmqproxy_client_stats_failures_total", "Consumers that did not answer GET_CONSUMER_RUNNING_INFO in time.",
            ["group"], registry=registry,
        )  # fmt: skip
        self.messages_in = Counter(
            "rocketmq_messages_in_total", "Messages produced.", [*COMMON, "topic", "message_type", "is_system"],
            registry=registry,
        )  # fmt: skip
        self.throughput_in = Counter(
            "rocketmq_throughput_in_total", "Bytes produced.", [*COMMON, "topic", "message_type", "is_system"],
            registry=registry,
        )  # fmt: skip
        self.messages_out = Counter(
            "rocketmq_messages_out_total", "Messages consumed.",
            [*COMMON, "topic", "consumer_group", "is_retry", "is_system"], registry=registry,
        )  # fmt: skip
        self.throughput_out = Counter(
            "rocketmq_throughput_out_total", "Bytes consumed.",
            [*COMMON, "topic", "consumer_group", "is_retry", "is_system"], registry=registry,
        )  # fmt: skip
        self.rpc_latency = Histogram(
            "rocketmq_rpc_latency", "Request to response, in milliseconds (RocketMQ 5.x).",
            [*COMMON, "protocol_type", "request_code", "response_code", "is_long_polling"],
            buckets=RPC_LATENCY_BUCKETS_MS, registry=registry,
        )  # fmt: skip
        self._client_view: dict[tuple[str, str, str, str], dict[str, float]] = {}
        self._children: dict[tuple, Any] = {}

    def _child(self, metric: Any, *labels: str) -> Any:
        """``metric.labels(*labels)``, cached: prometheus_client's lookup costs microseconds,
        and the hot paths (every send and pull) use a handful of label sets over and over."""
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    # --- hooks --------------------------------------------------------------------------------

    def on_pull(self, event: PullEvent) -> None:
        """A pull was answered (PullProcessor listener)."""
        topic, group = self.topic_label(event.topic), self.group_label(event.group)
        held = "true" if event.held else "false"
        self._child(self.pull_latency, topic, group, event.code, held).observe(event.total_ms / 1000)
        self._child(self.pull_service, topic, group).observe(event.service_ms / 1000)
        if event.held:
            self._child(self.pull_hold, topic, group, event.wake).observe(event.hold_ms / 1000)
            self._child(self.wakeups, topic, group, event.wake).inc()
            if event.wake == WAKE_TIMEOUT and event.suspend_ms:
                self.hold_overshoot.observe(max(0.0, (event.hold_ms - event.suspend_ms) / 1000))
        if event.msgs:
            is_retry = "true" if event.topic.startswith("%RETRY%") else "false"
            labels = (*self.common, topic, group, is_retry, is_system_topic(event.topic))
            self._child(self.messages_out, *labels).inc(event.msgs)
            self._child(self.throughput_out, *labels).inc(event.bytes)
        self._child(self.rpc_latency, *self.common, "remoting", "pull_message", event.code.lower(), held).observe(
            event.total_ms
        )

    def on_put(self, topic: str, messages: int, size: int, delayed: bool) -> None:
        """Messages were stored for a producer."""
        if topic.startswith(("%RETRY%", "%DLQ%")):
            return  # RocketMQ counts retry and DLQ puts elsewhere
        labels = (*self.common, self.topic_label(topic), "delay" if delayed else "normal", is_system_topic(topic))
        self._child(self.messages_in, *labels).inc(messages)
        self._child(self.throughput_in, *labels).inc(size)

    def on_request(self, request_code: int, response_code: int, elapsed_ms: float) -> None:
        """Any other request answered (not pulls: those come with their event)."""
        self._child(
            self.rpc_latency, *self.common, "remoting", code_name(request_code, response=False).lower(),
            code_name(response_code, response=True).lower(), "false",
        ).observe(elapsed_ms)  # fmt: skip

    def on_flush(self, seconds: float) -> None:
        self.store_flush.observe(seconds)

    def on_handoff(self, group: str, seconds: float) -> None:
        """A queue lock passed from one client to the next after ``seconds``."""
        self.lock_handoff.labels(self.group_label(group)).observe(seconds)

    def on_running_info(self, group: str, client_id: str, client_addr: str, info: ConsumerRunningInfo) -> None:
        """A consumer's own statistics (pull RT and TPS, consume RT and TPS) per topic."""
        self._forget_view(client_id, group)
        for topic, status in info.status_table.items():
            self._client_view[(client_addr, client_id, group, topic)] = {
                "rocketmq_client_consumer_pull_rt": status.pull_rt,
                "rocketmq_client_consumer_pull_tps": status.pull_tps,
                "rocketmq_client_consume_rt": status.consume_rt,
                "rocketmq_client_consume_ok_msg_tps": status.consume_ok_tps,
                "rocketmq_client_consume_fail_msg_tps": status.consume_failed_tps,
                "rocketmq_client_consume_fail_msg_count": float(status.consume_failed_msgs),
            }

    def on_running_info_failed(self, group: str, client_id: str) -> None:
        """A consumer did not answer the poll (in time, or with usable data): count it, and drop
        its last report so dashboards do not show stale numbers as current."""
        self.client_stats_failures.labels(self.group_label(group)).inc()
        self._forget_view(client_id, group)

    def forget_client(self, client_id: str) -> None:
        self._forget_view(client_id, None)

    def _forget_view(self, client_id: str, group: str | None) -> None:
        for key in [k for k in self._client_view if k[1] == client_id and group in (None, k[2])]:
            del self._client_view[key]

    def client_view(self) -> Iterable[tuple[tuple[str, str, str, str], dict[str, float]]]:
        return self._client_view.items()


class LiveState:
    """Collector reading live tables at scrape time (STYLE.md: no drifting inc/dec gauges)."""

    def __init__(
        self, metrics: Metrics, *, holds: Any, locks: Any, clients: Any, lag: Callable[[], Iterable]
    ) -> None:
        self.metrics = metrics
        self.holds = holds
        self.locks = locks
        self.clients = clients
        self.lag = lag

    def collect(self):
        m = self.metrics
        held = GaugeMetricFamily("rmqproxy_held_pulls", "Pulls held now.", labels=["topic", "consumer_group"])
        counts: dict[tuple[str, str], int] = {}
        for pull in self.holds.held():
            key = (m.topic_label(pull.key[0]), m.group_label(pull.group))
            counts[key] = counts.get(key, 0) + 1
        for key, value in counts.items():
            held.add_metric(list(key), value)
        yield held
        yield GaugeMetricFamily(
            "rmqproxy_held_pulls_limit", "maxHeldPulls: past it pulls are answered at once instead of held.",
            value=self.holds.max_held,
        )  # fmt: skip

        requests = CounterMetricFamily(
            "rmqproxy_lock_requests", "Lock and unlock requests by outcome.", labels=["consumer_group", "op", "outcome"]
        )
        for (group, op, outcome), value in self.locks.stats.requests.items():
            requests.add_metric([m.group_label(group), op, outcome], value)
        yield requests
        locked = GaugeMetricFamily("rmqproxy_locked_queues", "Queues locked now.", labels=["consumer_group"])
        for group in list(self.locks.tables):
            locked.add_metric([m.group_label(group)], self.locks.locked_queues(group))
        yield locked

        lag = GaugeMetricFamily(
            "rocketmq_consumer_lag_messages", "Messages not yet consumed (max offset minus committed).",
            labels=[*COMMON, "topic", "consumer_group", "is_retry", "is_system"],
        )  # fmt: skip
        inflight = GaugeMetricFamily(
            "rocketmq_consumer_inflight_messages", "Messages pulled but not committed.",
            labels=[*COMMON, "topic", "consumer_group", "is_retry", "is_system"],
        )  # fmt: skip
        for topic, group, lag_messages, inflight_messages in self.lag():
            labels = [*m.common, m.topic_label(topic), m.group_label(group),
                      "true" if topic.startswith("%RETRY%") else "false", is_system_topic(topic)]  # fmt: skip
            lag.add_metric(labels, lag_messages)
            inflight.add_metric(labels, inflight_messages)
        yield lag
        yield inflight

        producers = GaugeMetricFamily(
            "rocketmq_producer_connections", "Producer connections.",
            labels=[*COMMON, "language", "version", "protocol_type"],
        )  # fmt: skip
        consumers = GaugeMetricFamily(
            "rocketmq_consumer_connections", "Consumer connections.",
            labels=[*COMMON, "consumer_group", "language", "version", "consume_mode", "protocol_type", "is_system"],
        )  # fmt: skip
        producer_counts: dict[tuple, int] = {}
        for members in self.clients.producers.values():
            for info in members.values():
                key = (info.language.lower(), str(info.version))
                producer_counts[key] = producer_counts.get(key, 0) + 1
        for (language, version), value in producer_counts.items():
            producers.add_metric([*m.common, language, version, "remoting"], value)
        for name, group in self.clients.consumers.items():
            mode = "push" if group.consume_type == "CONSUME_PASSIVELY" else "pull"
            per: dict[tuple, int] = {}
            for info in group.members.values():
                key = (info.language.lower(), str(info.version))
                per[key] = per.get(key, 0) + 1
            for (language, version), value in per.items():
                labels = [*m.common, m.group_label(name), language, version, mode, "remoting", "false"]
                consumers.add_metric(labels, value)
        yield producers
        yield consumers

        families: dict[str, GaugeMetricFamily] = {}
        for labels, values in m.client_view():
            for name, value in values.items():
                family = families.get(name)
                if family is None:
                    family = families[name] = GaugeMetricFamily(name, name, labels=list(CLIENT_LABELS))
                family.add_metric(list(labels), value)
        yield from families.values()


class MetricsResource(Resource):
    """``GET /metrics`` rendered in the reactor thread."""

    isLeaf = True

    def __init__(self, registry: CollectorRegistry) -> None:
        super().__init__()
        self.registry = registry

    def render_GET(self, request) -> bytes:
        request.setHeader(b"Content-Type", CONTENT_TYPE_LATEST.encode())
        return generate_latest(self.registry)
