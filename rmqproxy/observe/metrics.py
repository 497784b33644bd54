"""Every Prometheus metric rmqproxy exports is defined here and only here (docs/operations.md, Metrics).

Three kinds:
- ``rmqproxy_*``: what no RocketMQ component measures — pull latency split into hold and service
  time, wake reasons, timeout overshoot, locks, flushes. Seconds, base units, ``_total`` counters.
- RocketMQ 5.x broker names with their exact units and labels (``BrokerMetricsConstant``,
  ``RemotingMetricsConstant`` of 5.3.1), so dashboards built for a 5.x broker work unchanged.
- The client view: what consumers report in GET_CONSUMER_RUNNING_INFO, under rocketmq-exporter's
  names and labels (``clientAddr``, ``clientId``, ``group``, ``topic``).

Live state (held pulls, locked queues, lag, connections) is read from the owning tables at scrape
time by a custom collector, never kept in inc/dec gauges that drift. Labelled histograms and
counters fed from the reactor thread are ``ReactorHistogram``/``ReactorCounter``: a child is one
list of bucket counts, where prometheus_client keeps a lock and a value object per bucket — with
hundreds of groups those tens of thousands of objects made each full garbage collection stall the
reactor for tens of milliseconds (held pulls then time out late). In a worker of ``proxy
--workers N`` every counter and histogram is one of those, its cells in the slot's file
(``Metrics(store=CounterFile(...))``, counter_file.py), so the worker restarted after a SIGKILL
continues each series. Everything is registered on a passed-in ``CollectorRegistry``. Label
cardinality is bounded: past ``max_label_values`` distinct topics (or groups) new ones are
reported as ``_other``; retry and DLQ topics all report as ``%RETRY%`` and ``%DLQ%``.
``/metrics`` is rendered in the reactor thread (``exposition``), so collectors read the tables
without locks.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.utils import floatToGoString

from codec.bodies import ConsumerRunningInfo
from codec.codes import code_name

from ..core.hold import WAKE_TIMEOUT
from .counter_file import CounterFile
from .pull_events import PullEvent
from ..core.names import DLQ_PREFIX, RETRY_PREFIX, is_system_topic

#: Seconds; from 0.5 ms (a local read) to 30 s (past the Java client's pull timeout).
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 20, 30)
OVERSHOOT_BUCKETS = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5)
#: ``rocketmq_rpc_latency`` buckets in ms, as RemotingMetricsManager (5.3.1) declares them.
RPC_LATENCY_BUCKETS_MS = (1, 3, 5, 7, 10, 100, 1000, 2000, 3000)
COMMON = ("cluster", "node_type", "node_id")
CLIENT_LABELS = ("clientAddr", "clientId", "group", "topic")

OTHER = "_other"
_HOT_PATH_CACHE = 10_000


#: A child's cells in a worker's counter file, as integers and as floats (``CounterFile.cells``).
Cells = tuple[memoryview, memoryview]


class _HistogramChild:
    __slots__ = ("_bounds", "counts", "_sum", "text")

    def __init__(self, bounds: tuple[float, ...], cells: Cells | None) -> None:
        self._bounds = bounds
        # per bucket, not cumulative; the last is +Inf. In a list, or the file's cells then the sum's
        self.counts: Any = [0] * (len(bounds) + 1) if cells is None else cells[0][:-1]
        self._sum: Any = [0.0] if cells is None else cells[1][-1:]
        self.text = ("", "", "")  # its labels as exposition text: before le, after le, all

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self._bounds, value)] += 1
        self._sum[0] += value

    @property
    def sum(self) -> float:
        return self._sum[0]


class _CounterChild:
    __slots__ = ("_value", "text")

    def __init__(self, cells: Cells | None) -> None:
        self._value: Any = [0.0] if cells is None else cells[1]
        self.text = ("", "", "")

    def inc(self, amount: float = 1) -> None:
        self._value[0] += amount

    @property
    def value(self) -> float:
        return self._value[0]


def _escape_value(value: str) -> str:
    """A label value as the text exposition writes it."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r'\"')


def _go_count(value: int) -> str:
    """``floatToGoString`` of a count, without its float round trip below a million (the usual case)."""
    return f"{value}.0" if 0 <= value < 1_000_000 else floatToGoString(value)


class _ReactorFamily:
    """A labelled metric whose children are created by ``labels(*values)`` and updated from one
    thread (the reactor's); it is its own collector, and renders its own text exposition in
    slices (``exposition``) so a scrape of thousands of children can let the reactor run between them.
    With a ``store`` (a worker's ``CounterFile``) each child's values live in the file."""

    #: the exposition's TYPE
    kind = ""
    #: 8-byte cells a child takes in a counter file
    cells = 1

    def __init__(self, name: str, documentation: str, labelnames: Iterable[str], registry: CollectorRegistry,
                 store: CounterFile | None = None) -> None:  # fmt: skip
        self.name = name
        self.documentation = documentation
        self.labelnames = list(labelnames)
        self.store = store
        self._children: dict[tuple[str, ...], Any] = {}
        # the exposition writes a sample's labels sorted by name; a histogram bucket's le among them
        self._order = sorted(range(len(self.labelnames)), key=self.labelnames.__getitem__)
        self._le_at = sum(1 for n in self.labelnames if n < "le")
        if store is not None:  # a dead worker's children, exposed again from the start
            for values in store.restored(name, self.cells):
                if len(values) == len(self.labelnames):
                    self.labels(*values)
        registry.register(self)

    def label_values(self, label: str) -> set[str]:
        """The values its children have of ``label`` (none if it has no such label)."""
        if label not in self.labelnames:
            return set()
        at = self.labelnames.index(label)
        return {values[at] for values in self._children}

    def labels(self, *values: str) -> Any:
        child = self._children.get(values)
        if child is None:
            if len(values) != len(self.labelnames):
                raise ValueError(f"{self.name} takes labels {self.labelnames}, got {values}")
            cells = None if self.store is None else self.store.cells(self.name, values, self.cells)
            child = self._new_child(cells)
            pairs = [f'{self.labelnames[i]}="{_escape_value(values[i])}"' for i in self._order]
            before, after = pairs[: self._le_at], pairs[self._le_at :]
            child.text = ("".join(p + "," for p in before), "".join("," + p for p in after), ",".join(pairs))
            self._children[values] = child
        return child

    def exposition(self, children_per_slice: int) -> Iterator[str]:
        """This family's text exposition, as ``generate_latest`` writes it, in slices of at most
        ``children_per_slice`` children. The children are the ones there when it starts."""
        children = list(self._children.values())
        name = self.exposed_name
        doc = self.documentation.replace("\\", r"\\").replace("\n", r"\n")
        lines = [f"# HELP {name} {doc}\n# TYPE {name} {self.kind}\n"]
        for start in range(0, len(children), children_per_slice):
            for child in children[start : start + children_per_slice]:
                self._lines(child, lines)
            yield "".join(lines)
            lines = []
        if lines:
            yield "".join(lines)

    @property
    def exposed_name(self) -> str:
        return self.name

    def _lines(self, child: Any, out: list[str]) -> None:
        raise NotImplementedError

    def _new_child(self, cells: Cells | None) -> Any:
        raise NotImplementedError

    def describe(self) -> list:
        return [self._family()]

    def _family(self) -> Any:
        raise NotImplementedError


class ReactorHistogram(_ReactorFamily):
    """A histogram (``le`` buckets, ``_sum``, ``_count``) as prometheus_client exposes one."""

    kind = "histogram"

    def __init__(
        self, name: str, documentation: str, labelnames: Iterable[str], *, buckets: tuple[float, ...],
        registry: CollectorRegistry, store: CounterFile | None = None,
    ) -> None:  # fmt: skip
        self.bounds = tuple(float(b) for b in buckets)
        self._les = [floatToGoString(b) for b in self.bounds] + ["+Inf"]
        self.cells = len(self.bounds) + 2  # the buckets, +Inf, the sum
        super().__init__(name, documentation, labelnames, registry, store)

    def _new_child(self, cells: Cells | None) -> _HistogramChild:
        return _HistogramChild(self.bounds, cells)

    def _family(self) -> HistogramMetricFamily:
        return HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def collect(self) -> Iterable[HistogramMetricFamily]:
        family = self._family()
        for values, child in self._children.items():
            total, buckets = 0, []
            for le, count in zip(self._les, child.counts, strict=True):
                total += count
                buckets.append((le, total))
            family.add_metric(list(values), buckets, child.sum)
        yield family

    def _lines(self, child: _HistogramChild, out: list[str]) -> None:
        before, after, every = child.text
        bucket = f"{self.name}_bucket{{{before}le=\""
        total = 0
        for le, count in zip(self._les, child.counts, strict=True):
            total += count
            out.append(f'{bucket}{le}"{after}}} {_go_count(total)}\n')
        labels = f"{{{every}}}" if every else ""
        out.append(f"{self.name}_count{labels} {_go_count(total)}\n{self.name}_sum{labels} {floatToGoString(child.sum)}\n")


class ReactorCounter(_ReactorFamily):
    """A counter; ``name`` without ``_total``, which the exposition adds."""

    kind = "counter"

    def _new_child(self, cells: Cells | None) -> _CounterChild:
        return _CounterChild(cells)

    def _family(self) -> CounterMetricFamily:
        return CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def collect(self) -> Iterable[CounterMetricFamily]:
        family = self._family()
        for values, child in self._children.items():
            family.add_metric(list(values), child.value)
        yield family

    @property
    def exposed_name(self) -> str:
        return self.name + "_total"

    def _lines(self, child: _CounterChild, out: list[str]) -> None:
        every = child.text[2]
        labels = f"{{{every}}}" if every else ""
        out.append(f"{self.name}_total{labels} {floatToGoString(child.value)}\n")


class LabelLimiter:
    """Maps topic and group names to label values with a bounded number of distinct values."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.seen: set[str] = set()

    def __call__(self, name: str) -> str:
        if name.startswith(RETRY_PREFIX):
            return RETRY_PREFIX
        if name.startswith(DLQ_PREFIX):
            return DLQ_PREFIX
        if name in self.seen:
            return name
        if len(self.seen) < self.limit:
            self.seen.add(name)
            return name
        return OTHER

    def remember(self, values: Iterable[str]) -> None:
        """Values a dead worker of this slot gave out (its children in the file) count toward the
        limit: its successors together give out no more than ``limit``, and the file stays bounded."""
        for value in values:
            if value not in (OTHER, RETRY_PREFIX, DLQ_PREFIX) and len(self.seen) < self.limit:
                self.seen.add(value)


def system_label(topic: str) -> str:
    """The ``is_system`` label value of ``topic``."""
    return "true" if is_system_topic(topic) else "false"


class Metrics:
    """The metric objects, and the hooks that feed them from pull events and requests."""

    def __init__(
        self, registry: CollectorRegistry, *, cluster: str, node_id: str, max_label_values: int = 500,
        broker_label: bool = False, store: CounterFile | None = None,
    ) -> None:
        self.registry = registry
        # a proxy worker's counters and histograms live in its slot's file (counter_file), else in memory
        self.store = store
        on = {"registry": registry, "store": store}
        self.common = (cluster, "broker", node_id)
        # proxy mode: the pull families say which upstream broker served the pull
        self.broker_label = broker_label
        by = ["broker"] if broker_label else []
        self.topic_label = LabelLimiter(max_label_values)
        self.group_label = LabelLimiter(max_label_values)
        self.pull_latency = ReactorHistogram(
            "rmqproxy_pull_latency_seconds", "Pull request to answer, held or not (what clients see, less network).",
            ["topic", "consumer_group", "code", "held", *by], buckets=LATENCY_BUCKETS, **on,
        )  # fmt: skip
        self.pull_hold = ReactorHistogram(
            "rmqproxy_pull_hold_seconds", "Time a pull spent held, by what ended the hold.",
            ["topic", "consumer_group", "wake", *by], buckets=LATENCY_BUCKETS, **on,
        )  # fmt: skip
        self.pull_service = ReactorHistogram(
            "rmqproxy_pull_service_seconds", "Time spent reading and answering a pull, outside any hold.",
            ["topic", "consumer_group", *by], buckets=LATENCY_BUCKETS, **on,
        )  # fmt: skip
        self.hold_overshoot = ReactorHistogram(
            "rmqproxy_pull_hold_overshoot_seconds", "Timeout wakes: actual hold minus the requested suspend time.",
            [], buckets=OVERSHOOT_BUCKETS, **on,
        )  # fmt: skip
        self._overshoot = self.hold_overshoot.labels()
        self.wakeups = ReactorCounter(
            "rmqproxy_hold_wakeups", "Held pulls ended, by reason.", ["topic", "consumer_group", "wake", *by],
            **on,
        )  # fmt: skip
        self.lock_handoff = ReactorHistogram(
            "rmqproxy_lock_handoff_seconds", "Queue lock released by one client until granted to the next.",
            ["consumer_group"], buckets=LATENCY_BUCKETS + (31, 60, 120), **on,
        )  # fmt: skip
        # observed by the store's flush thread alone (one writer, as every reactor family has)
        self.store_flush = ReactorHistogram(
            "rmqproxy_store_flush_seconds", "Commit-log fsync duration.", [], buckets=LATENCY_BUCKETS, **on
        )
        self._flush = self.store_flush.labels()
        self.client_stats_failures = ReactorCounter(
            "rmqproxy_client_stats_failures", "Consumers that did not answer GET_CONSUMER_RUNNING_INFO in time.",
            ["group"], **on,
        )  # fmt: skip
        self.messages_in = ReactorCounter(
            "rocketmq_messages_in", "Messages produced.", [*COMMON, "topic", "message_type", "is_system"],
            **on,
        )  # fmt: skip
        self.throughput_in = ReactorCounter(
            "rocketmq_throughput_in", "Bytes produced.", [*COMMON, "topic", "message_type", "is_system"],
            **on,
        )  # fmt: skip
        self.messages_out = ReactorCounter(
            "rocketmq_messages_out", "Messages consumed.",
            [*COMMON, "topic", "consumer_group", "is_retry", "is_system"], **on,
        )  # fmt: skip
        self.throughput_out = ReactorCounter(
            "rocketmq_throughput_out", "Bytes consumed.",
            [*COMMON, "topic", "consumer_group", "is_retry", "is_system"], **on,
        )  # fmt: skip
        self.rpc_latency = ReactorHistogram(
            "rocketmq_rpc_latency", "Request to response, in milliseconds (RocketMQ 5.x).",
            [*COMMON, "protocol_type", "request_code", "response_code", "is_long_polling"],
            buckets=RPC_LATENCY_BUCKETS_MS, **on,
        )  # fmt: skip
        if store is not None:  # the dead worker's topics and groups count toward max_label_values
            for family in [f for f in vars(self).values() if isinstance(f, _ReactorFamily)]:
                self.topic_label.remember(family.label_values("topic"))
                self.group_label.remember(family.label_values("consumer_group") | family.label_values("group"))
        self._client_view: dict[tuple[str, str, str, str], dict[str, float]] = {}
        # Children by raw name or code, so every send skips label mapping (bounded: a client may
        # send any code, a producer any topic).
        self._put_children: dict[tuple[str, bool], tuple[Any, Any]] = {}
        self._request_children: dict[tuple[int, int], Any] = {}

    # --- hooks --------------------------------------------------------------------------------

    def on_pull(self, event: PullEvent, broker: str = "") -> None:
        """A pull was answered (PullProcessor listener; in proxy mode, by ``broker``)."""
        topic, group = self.topic_label(event.topic), self.group_label(event.group)
        held = "true" if event.held else "false"
        by = (broker,) if self.broker_label else ()
        self.pull_latency.labels(topic, group, event.code, held, *by).observe(event.total_ms / 1000)
        self.pull_service.labels(topic, group, *by).observe(event.service_ms / 1000)
        if event.held:
            self.pull_hold.labels(topic, group, event.wake, *by).observe(event.hold_ms / 1000)
            self.wakeups.labels(topic, group, event.wake, *by).inc()
            if event.wake == WAKE_TIMEOUT and event.suspend_ms:
                self._overshoot.observe(max(0.0, (event.hold_ms - event.suspend_ms) / 1000))
        if event.msgs:
            is_retry = "true" if event.topic.startswith(RETRY_PREFIX) else "false"
            labels = (*self.common, topic, group, is_retry, system_label(event.topic))
            self.messages_out.labels(*labels).inc(event.msgs)
            self.throughput_out.labels(*labels).inc(event.bytes)
        request = "pull_message" if event.protocol == "remoting" else "receive_message"
        self.rpc_latency.labels(*self.common, event.protocol, request, event.code.lower(), held).observe(event.total_ms)

    def on_put(self, topic: str, messages: int, size: int, delayed: bool) -> None:
        """Messages were stored for a producer."""
        children = self._put_children.get((topic, delayed))
        if children is None:
            if topic.startswith((RETRY_PREFIX, DLQ_PREFIX)):
                return  # RocketMQ counts retry and DLQ puts elsewhere
            labels = (*self.common, self.topic_label(topic), "delay" if delayed else "normal", system_label(topic))
            children = (self.messages_in.labels(*labels), self.throughput_in.labels(*labels))
            if len(self._put_children) < _HOT_PATH_CACHE:
                self._put_children[(topic, delayed)] = children
        children[0].inc(messages)
        children[1].inc(size)

    def on_grpc(self, rpc_name: str, code_name: str, elapsed_ms: float) -> None:
        """A gRPC call answered (not ReceiveMessage: those come with their pull events)."""
        self.rpc_latency.labels(*self.common, "grpc", rpc_name, code_name.lower(), "false").observe(elapsed_ms)

    def on_request(self, request_code: int, response_code: int, elapsed_ms: float) -> None:
        """Any other request answered (not pulls: those come with their event)."""
        child = self._request_children.get((request_code, response_code))
        if child is None:
            request = code_name(request_code, response=False).lower()
            response = code_name(response_code, response=True).lower()
            child = self.rpc_latency.labels(*self.common, "remoting", request, response, "false")
            if len(self._request_children) < _HOT_PATH_CACHE:
                self._request_children[(request_code, response_code)] = child
        child.observe(elapsed_ms)

    def on_flush(self, seconds: float) -> None:
        self._flush.observe(seconds)

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
    """Collector reading live tables at scrape time (no inc/dec gauges that could drift from the tables)."""

    def __init__(
        self, metrics: Metrics, *, holds: Any, locks: Any = None, clients: Any = None,
        lag: Callable[[], Iterable] | None = None,
        pull_log: Any = None, rejections: Any = None, transactions: Any = None, timers: Any = None,
        pops: Any = None, frames: Any = None,
    ) -> None:
        self.metrics = metrics
        self.frames = frames
        self.pops = pops
        self.transactions = transactions
        self.timers = timers
        self.pull_log = pull_log
        self.rejections = rejections
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
            "rmqproxy_held_pulls_limit",
            "maxHeldPulls: at it a pull is held only for a connection below its fair share.",
            value=self.holds.max_held,
        )  # fmt: skip

        if self.rejections is not None:
            rejected = CounterMetricFamily(
                "rmqproxy_rejected_requests", "Requests and frames rejected, by reason.", labels=["reason"]
            )
            for reason, value in self.rejections.counts.items():
                rejected.add_metric([reason], value)
            yield rejected
        if self.frames is not None:
            yield GaugeMetricFamily(
                "rmqproxy_unfinished_frame_bytes", "Bytes of frames connections have begun and not finished, in all "
                "(maxUnfinishedFrameBytes bounds them).", value=self.frames.total,
            )  # fmt: skip
        if self.transactions is not None:
            events = CounterMetricFamily(
                "rmqproxy_transactions", "Transactional messages: half messages prepared, commits, rollbacks, "
                "check-backs sent, half messages discarded after transactionCheckMax, checks with no live producer.",
                labels=["event"],
            )  # fmt: skip
            for event, value in self.transactions.counts.items():
                events.add_metric([event], value)
            yield events
        if self.timers is not None:
            yield GaugeMetricFamily(
                "rmqproxy_timer_messages_pending", "Timer messages waiting in memory for their time (past the "
                "in-memory bound the later ones wait in the timer queue).", value=self.timers.pending,
            )  # fmt: skip
            yield CounterMetricFamily(
                "rmqproxy_timer_messages_delivered", "Timer messages put into their topic at their time.",
                value=self.timers.delivered,
            )  # fmt: skip
        if self.pull_log is not None:
            yield from self._pull_log(self.pull_log)
        if self.pops is not None:
            yield from self._pops()

        if self.locks is not None:
            yield from self._locks()
        if self.lag is not None:
            yield from self._lag()
        if self.clients is not None:
            yield from self._clients()
        families: dict[str, GaugeMetricFamily] = {}
        for labels, values in m.client_view():
            for name, value in values.items():
                family = families.get(name)
                if family is None:
                    family = families[name] = GaugeMetricFamily(name, name, labels=list(CLIENT_LABELS))
                family.add_metric(list(labels), value)
        yield from families.values()

    def _pops(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        """gRPC consumers' pops: messages received and not acked, deliveries past the first, DLQ forwards."""
        m = self.metrics
        families = (
            (GaugeMetricFamily, "rmqproxy_pop_invisible_messages",
             "Messages gRPC consumers received and have not acked (in flight, invisible to their group).",
             ((g, t, n) for g, t, n in self.pops.invisible())),
            (CounterMetricFamily, "rmqproxy_pop_redeliveries",
             "Deliveries to gRPC consumers past a message's first (not acked in time, or given back).",
             ((g, t, n) for (g, t), n in self.pops.redeliveries.items())),
            (CounterMetricFamily, "rmqproxy_pop_dlq_forwards",
             "Messages of gRPC consumers put in their group's DLQ (past the group's attempts, or forwarded).",
             ((g, t, n) for (g, t), n in self.pops.dlq_forwards.items())),
        )  # fmt: skip
        for kind, name, help_text, rows in families:
            family = kind(name, help_text, labels=["topic", "consumer_group"])
            totals: dict[tuple[str, str], float] = {}
            for group, topic, value in rows:
                key = (m.topic_label(topic), m.group_label(group))
                totals[key] = totals.get(key, 0) + value
            for key, value in totals.items():
                family.add_metric(list(key), value)
            yield family

    @staticmethod
    def _pull_log(pull_log: Any) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        """The event log: what it dropped (where events are written), its size against its bound
        and what retention deleted (where the folder is kept: under ``proxy --workers`` the
        workers write and the supervisor keeps, so a sum over workers counts each once)."""
        if pull_log.role != "keeper":
            yield CounterMetricFamily(
                "rmqproxy_pull_log_dropped", "Pull events the event log dropped (writer behind, a failed write, or a "
                "disk too full to write).", value=pull_log.dropped,
            )  # fmt: skip
            yield GaugeMetricFamily("rmqproxy_pull_log_paused", "1 while the event log writes nothing because its "
                                    "disk stays above 85% used.", value=int(pull_log.paused))  # fmt: skip
        if pull_log.role == "writer":
            return
        yield GaugeMetricFamily("rmqproxy_pull_log_bytes", "Bytes of event-log files on disk.", value=pull_log.bytes)
        yield GaugeMetricFamily("rmqproxy_pull_log_max_bytes", "The event log's bound in bytes (pullLogMaxBytes).",
                                value=pull_log.max_bytes)  # fmt: skip
        deleted = CounterMetricFamily(
            "rmqproxy_pull_log_deleted_files", "Event-log files retention deleted, by why: age "
            "(pullLogRetentionHours), size (pullLogMaxBytes) or disk (above 85% used).", labels=["reason"],
        )  # fmt: skip
        for reason in ("age", "size", "disk"):
            deleted.add_metric([reason], pull_log.deleted[reason])
        yield deleted
        yield CounterMetricFamily("rmqproxy_pull_log_deleted_bytes", "Bytes of event-log files retention deleted.",
                                  value=pull_log.deleted_bytes)  # fmt: skip

    def _locks(self):
        m = self.metrics
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

    def _lag(self):
        m = self.metrics
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
                      "true" if topic.startswith(RETRY_PREFIX) else "false", system_label(topic)]  # fmt: skip
            lag.add_metric(labels, lag_messages)
            inflight.add_metric(labels, inflight_messages)
        yield lag
        yield inflight

    def _clients(self):
        m = self.metrics
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
