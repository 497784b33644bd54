"""Metric names for PromQL, taken from ``rmqproxy.observe.metrics`` rather than retyped: one owner per name.

``rmqproxy.observe.metrics.Metrics`` owns the metric objects: their names are read off those objects
(``describe()``). The live-state families (held pulls, locks, lag, connections) and the client
view only exist inside ``LiveState.collect()``, so ``CATALOG`` is built by running that collector
once over empty tables plus one reported client; names of those families are looked up in the
catalog by ``_emitted``, which fails at import if rmqproxy stops exporting them. Either way a
renamed metric breaks ``python -m dashboards`` (and the committed-files test), not a dashboard in
production.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

from prometheus_client import CollectorRegistry

from codec.bodies import ConsumerRunningInfo, ConsumeStatus
from rmqproxy.observe.metrics import LiveState, Metrics


@dataclasses.dataclass(frozen=True)
class Family:
    """One metric family as the exposition names it; the properties give its series names."""

    name: str
    type: str  # counter, gauge or histogram

    def _need(self, kind: str) -> None:
        if self.type != kind:
            raise TypeError(f"{self.name} is a {self.type}, not a {kind}")

    @property
    def total(self) -> str:
        self._need("counter")
        return f"{self.name}_total"

    @property
    def gauge(self) -> str:
        self._need("gauge")
        return self.name

    @property
    def bucket(self) -> str:
        self._need("histogram")
        return f"{self.name}_bucket"

    @property
    def sum(self) -> str:
        self._need("histogram")
        return f"{self.name}_sum"

    @property
    def count(self) -> str:
        self._need("histogram")
        return f"{self.name}_count"


def _catalog() -> tuple[Metrics, dict[str, Family]]:
    registry = CollectorRegistry()
    metrics = Metrics(registry, cluster="c", node_id="n")
    empty = SimpleNamespace(
        holds=SimpleNamespace(held=list, max_held=1),
        locks=SimpleNamespace(stats=SimpleNamespace(requests={}), tables={}, locked_queues=lambda group: 0),
        clients=SimpleNamespace(producers={}, consumers={}),
        pops=SimpleNamespace(invisible=list, redeliveries={}, dlq_forwards={}),
    )
    registry.register(LiveState(metrics, holds=empty.holds, locks=empty.locks, clients=empty.clients, lag=list,
                                pops=empty.pops))  # fmt: skip
    metrics.on_running_info("g", "client@1", "127.0.0.1:1", ConsumerRunningInfo(status_table={"t": ConsumeStatus()}))
    return metrics, {f.name: Family(f.name, f.type) for f in registry.collect()}


_METRICS, CATALOG = _catalog()


def _of(metric: object) -> Family:
    (described,) = metric.describe()  # type: ignore[attr-defined]
    return CATALOG[described.name]


def _emitted(name: str) -> Family:
    try:
        return CATALOG[name]
    except KeyError:
        raise LookupError(f"rmqproxy.observe.metrics no longer exports {name}") from None


# rmqproxy_*: what only rmqproxy measures (seconds).
PULL_LATENCY = _of(_METRICS.pull_latency)
PULL_HOLD = _of(_METRICS.pull_hold)
PULL_SERVICE = _of(_METRICS.pull_service)
HOLD_OVERSHOOT = _of(_METRICS.hold_overshoot)
HOLD_WAKEUPS = _of(_METRICS.wakeups)
LOCK_HANDOFF = _of(_METRICS.lock_handoff)
STORE_FLUSH = _of(_METRICS.store_flush)
CLIENT_STATS_FAILURES = _of(_METRICS.client_stats_failures)
HELD_PULLS = _emitted("rmqproxy_held_pulls")
HELD_PULLS_LIMIT = _emitted("rmqproxy_held_pulls_limit")
LOCK_REQUESTS = _emitted("rmqproxy_lock_requests")
LOCKED_QUEUES = _emitted("rmqproxy_locked_queues")
POP_INVISIBLE = _emitted("rmqproxy_pop_invisible_messages")
POP_REDELIVERIES = _emitted("rmqproxy_pop_redeliveries")
POP_DLQ_FORWARDS = _emitted("rmqproxy_pop_dlq_forwards")

# RocketMQ 5.x broker names (exact units: rocketmq_rpc_latency is in milliseconds).
MESSAGES_IN = _of(_METRICS.messages_in)
THROUGHPUT_IN = _of(_METRICS.throughput_in)
MESSAGES_OUT = _of(_METRICS.messages_out)
THROUGHPUT_OUT = _of(_METRICS.throughput_out)
RPC_LATENCY_MS = _of(_METRICS.rpc_latency)
CONSUMER_LAG = _emitted("rocketmq_consumer_lag_messages")
CONSUMER_INFLIGHT = _emitted("rocketmq_consumer_inflight_messages")
PRODUCER_CONNECTIONS = _emitted("rocketmq_producer_connections")
CONSUMER_CONNECTIONS = _emitted("rocketmq_consumer_connections")

# What consumers report in GET_CONSUMER_RUNNING_INFO (rocketmq-exporter names; RT in ms, TPS per s;
# labels clientAddr, clientId, group, topic).
CLIENT_PULL_RT_MS = _emitted("rocketmq_client_consumer_pull_rt")
CLIENT_PULL_TPS = _emitted("rocketmq_client_consumer_pull_tps")
CLIENT_CONSUME_RT_MS = _emitted("rocketmq_client_consume_rt")
CLIENT_CONSUME_OK_TPS = _emitted("rocketmq_client_consume_ok_msg_tps")
CLIENT_CONSUME_FAIL_TPS = _emitted("rocketmq_client_consume_fail_msg_tps")
CLIENT_CONSUME_FAIL_COUNT = _emitted("rocketmq_client_consume_fail_msg_count")
