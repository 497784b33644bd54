"""Prometheus alert rules for rmqproxy, written to ``dashboards/alerts.yml`` by ``python -m dashboards``.

Each rule is built from ``probes``: the sub-expressions that carry the measurement, before any
threshold or set operation. A healthy server under traffic has data for every probe even though
the rule itself is quiet, so ``tests/metrics/test_prometheus.py`` can check against a real
Prometheus that each probe returns data, without having to break the server. Every probe appears
verbatim in its rule's ``expr`` (tests check that too).

Thresholds are constants here so the dashboards draw the same lines the rules alert on.
"""

from __future__ import annotations

import dataclasses

import yaml

from . import names as N
from .promql import increase, quantile, sel, sum_by

#: Pull service time (outside any hold) p99 above this is the broker's own slowness: a local read
#: and answer take about 0.5 ms at p99 under the traffic of ``tests/metrics/test_prometheus.py``,
#: so 100 ms means the reactor or the disk is stalling, not a busy moment.
SERVICE_P99_ALERT_S = 0.1
#: Share of ``maxHeldPulls`` (exported as ``rmqproxy_held_pulls_limit``) held before the alert:
#: past the cap pulls are answered at once instead of held (rmqproxy.core.hold).
HELD_PULLS_ALERT_RATIO = 0.9
#: Each locked queue changing owner more than twice in 15 min: one consumer joining or leaving
#: moves a queue once, so more is consumers flapping (restarts, lost connections, GC pauses).
LOCK_HANDOFFS_PER_QUEUE = 2
LOCK_CHURN_WINDOW = "15m"
#: Lag below this is not worth waking anyone for, however it moves.
LAG_ALERT_MESSAGES = 1000
LAG_WINDOW = "15m"
#: A consumer that does not answer GET_CONSUMER_RUNNING_INFO fails every poll
#: (``clientStatsIntervalSeconds``, 60 s by default): ten failures per 10 min. rmqproxy creates a
#: group's failure counter at its first failure (value 1), which increase() cannot see, so the rule
#: fires from about the fourth failure of a group on.
CLIENT_FAILURES_ALERT = 3
CLIENT_FAILURES_WINDOW = "10m"


@dataclasses.dataclass(frozen=True)
class Rule:
    alert: str
    expr: str
    probes: tuple[str, ...]
    for_: str
    severity: str
    summary: str
    description: str

    def to_yaml_data(self) -> dict:
        return {
            "alert": self.alert,
            "expr": self.expr,
            "for": self.for_,
            "labels": {"severity": self.severity},
            "annotations": {"summary": self.summary, "description": self.description},
        }


def _service_p99() -> Rule:
    p99 = quantile(0.99, N.PULL_SERVICE.bucket, ["instance"], window="5m")
    return Rule(
        alert="RmqproxyPullServiceTimeHigh",
        expr=f"{p99}\n> {SERVICE_P99_ALERT_S:g}",
        probes=(p99,),
        for_="10m",
        severity="warning",
        summary="Pull service time p99 is {{ $value | humanizeDuration }} on {{ $labels.instance }}",
        description=(
            f"Pulls spend more than {SERVICE_P99_ALERT_S:g} s reading the store and answering, outside any hold, at "
            "the 99th percentile (rmqproxy_pull_service_seconds). Hold time is excluded, so quiet producers do not "
            "raise this: the broker itself is slow. Look at store flush latency, disk and CPU, and at the Pull path "
            "dashboard."
        ),
    )


def _held_pulls_near_cap() -> Rule:
    # per worker of a ``proxy --workers N``, whose cap is its share (one process: no worker label)
    held = sum_by(["instance", "worker"], N.HELD_PULLS.gauge)
    cap = f"max by (instance, worker) ({N.HELD_PULLS_LIMIT.gauge})"
    return Rule(
        alert="RmqproxyHeldPullsNearCap",
        expr=f"{held}\n> {HELD_PULLS_ALERT_RATIO} * {cap}",
        probes=(held, cap),
        for_="5m",
        severity="critical",
        summary="{{ $value }} pulls held on {{ $labels.instance }}, near its maxHeldPulls",
        description=(
            f"More than {HELD_PULLS_ALERT_RATIO:.0%} of maxHeldPulls (rmqproxy_held_pulls_limit) pulls are "
            "held (by a proxy's worker: of its share). Past the cap pulls are answered at once instead of held, "
            "so consumers fall back to busy polling. Raise maxHeldPulls or add brokers."
        ),
    )


def _lock_churn() -> Rule:
    labels = ["instance", "consumer_group"]
    handoffs = sum_by(labels, increase(N.LOCK_HANDOFF.count, LOCK_CHURN_WINDOW))
    queues = f"clamp_min({sum_by(labels, N.LOCKED_QUEUES.gauge)}, 1)"
    return Rule(
        alert="RmqproxyLockChurn",
        expr=f"{handoffs}\n> {LOCK_HANDOFFS_PER_QUEUE} * {queues}",
        probes=(handoffs, queues),
        for_="5m",
        severity="warning",
        summary="Queue locks of {{ $labels.consumer_group }} keep changing owner ({{ $value }} handoffs in "
        + LOCK_CHURN_WINDOW
        + ")",
        description=(
            f"Orderly consumers of the group passed queue locks between clients more than {LOCK_HANDOFFS_PER_QUEUE} "
            f"times per locked queue in {LOCK_CHURN_WINDOW}. Each handoff pauses that queue; consumers are "
            "joining and leaving repeatedly (restarts, dropped connections, long GC pauses). See the Orderly & "
            "locks dashboard."
        ),
    )


def _lag_growing() -> Rule:
    labels = ["instance", "topic", "consumer_group"]
    lag = sel(N.CONSUMER_LAG.gauge, 'is_system="false"')
    growth = sum_by(labels, f"deriv({lag}[{LAG_WINDOW}])")
    level = sum_by(labels, lag)
    return Rule(
        alert="RmqproxyConsumerLagGrowing",
        expr=f"{growth} > 0\nand {level} > {LAG_ALERT_MESSAGES}",
        probes=(growth, level),
        for_=LAG_WINDOW,
        severity="warning",
        summary="Lag of {{ $labels.consumer_group }} on {{ $labels.topic }} keeps growing",
        description=(
            f"More than {LAG_ALERT_MESSAGES} messages are not consumed and the backlog has grown over the last "
            f"{LAG_WINDOW} (rocketmq_consumer_lag_messages, from committed offsets): consumers are slower than "
            "producers or stopped committing. Compare messages in and out on the Broker overview dashboard."
        ),
    )


def _client_stats_failing() -> Rule:
    failures = sum_by(["instance", "group"], increase(N.CLIENT_STATS_FAILURES.total, CLIENT_FAILURES_WINDOW))
    return Rule(
        alert="RmqproxyClientStatsFailing",
        expr=f"{failures} >= {CLIENT_FAILURES_ALERT}",
        probes=(failures,),
        for_="0m",
        severity="warning",
        summary="Consumers of {{ $labels.group }} do not answer GET_CONSUMER_RUNNING_INFO",
        description=(
            f"At least {CLIENT_FAILURES_ALERT} running-info requests to consumers of the group failed or timed out "
            f"in {CLIENT_FAILURES_WINDOW} (rmqproxy_client_stats_failures_total). The consumer is connected but "
            "not answering (stuck, overloaded or not a Java client), and the client-side pull and consume "
            "metrics of the group are missing or stale."
        ),
    )


def _client_metrics_missing() -> Rule:
    connected = sum_by(["instance", "consumer_group"], sel(N.CONSUMER_CONNECTIONS.gauge, 'consume_mode="push"'))
    reporting = sum_by(["instance", "group"], N.CLIENT_PULL_RT_MS.gauge)
    return Rule(
        alert="RmqproxyClientMetricsMissing",
        expr=(
            f"{connected}\nunless on (instance, consumer_group)\n"
            f'label_replace({reporting}, "consumer_group", "$1", "group", "(.*)")'
        ),
        probes=(connected, reporting),
        for_="10m",
        severity="info",
        summary="Push consumers of {{ $labels.consumer_group }} are connected but report no client metrics",
        description=(
            "The group has push consumers connected to this broker but no rocketmq_client_consumer_pull_rt "
            "series: their GET_CONSUMER_RUNNING_INFO answers are missing. The wait (10m) is longer than several "
            "polls (clientStatsIntervalSeconds, 60 s by default)."
        ),
    )


def rules() -> tuple[Rule, ...]:
    return (
        _service_p99(),
        _held_pulls_near_cap(),
        _lock_churn(),
        _lag_growing(),
        _client_stats_failing(),
        _client_metrics_missing(),
    )


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)

HEADER = "# Generated by `python -m dashboards` from dashboards/alerts.py: edit that, not this file.\n"


def render() -> str:
    """The rules file (Prometheus ``rule_files`` format) as text."""
    data = {"groups": [{"name": "rmqproxy", "rules": [r.to_yaml_data() for r in rules()]}]}
    return HEADER + yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=100, allow_unicode=True)
