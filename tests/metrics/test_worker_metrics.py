"""The supervisor's one ``/metrics`` for ``proxy --workers N``: every worker's snapshot merged with
its own registry, a ``worker`` label on each worker sample (rmqproxy/observe/worker_metrics.py)."""

from __future__ import annotations

import collections
import math
from types import SimpleNamespace

import pytest

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import UnknownMetricFamily
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from twisted.internet import task

from rmqproxy.observe.metrics import LiveState, Metrics
from rmqproxy.observe.worker_metrics import WorkerExpositions, worker_snapshot

from .test_counter_file import traffic, worker_metrics
from .test_exposition import busy_registry


def snapshot(registry: CollectorRegistry, slot: int) -> bytes:
    clock = task.Clock()
    rendered = worker_snapshot(registry, clock, slot)
    while not rendered.called:
        clock.advance(0)
    return rendered.result


def odd_registry(slot: int) -> CollectorRegistry:
    """A worker's: a busy one, with NaN, +Inf, untyped and awkward label values."""
    registry = busy_registry(groups=20 + slot)
    Gauge("odd_gauge", "NaN and infinities.", ["v"], registry=registry).labels('a "q"\\ {x} y').set(math.nan)
    Gauge("inf_gauge", "Inf.", registry=registry).set(math.inf)

    class Untyped:
        def collect(self):
            family = UnknownMetricFamily("odd_untyped", "Untyped.", labels=["k"])
            family.add_metric(["line\nbreak"], -math.inf)
            yield family

    registry.register(Untyped())
    return registry


def parsed(text: str) -> dict[str, tuple[str, list]]:
    """Family name -> (type, samples); fails on a family named twice."""
    families: dict[str, tuple[str, list]] = {}
    for family in text_string_to_metric_families(text):
        assert family.name not in families, f"{family.name} twice"
        families[family.name] = (family.type, family.samples)
    return families


def same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def test_the_merge_has_each_family_once_and_every_worker_sample_labelled() -> None:
    workers = {0: odd_registry(0), 1: odd_registry(1)}
    own = CollectorRegistry()
    Counter("rmqproxy_worker_restarts", "Workers restarted.", ["slot"], registry=own).labels("1").inc()
    Gauge("odd_gauge", "The supervisor's own sample of a worker family.", ["v"], registry=own).labels("sup").set(1)
    expositions = WorkerExpositions()
    for slot, registry in workers.items():
        expositions.update(slot, snapshot(registry, slot))
    merged = parsed(expositions.render(own).decode())

    expected: dict[str, tuple[str, list]] = {}
    for slot, registry in [(None, own), *workers.items()]:
        for name, (kind, rows) in parsed(generate_latest(registry).decode()).items():
            family = expected.setdefault(name, (kind, []))
            family[1].extend((s.name, {**s.labels, **({} if slot is None else {"worker": str(slot)})}, s.value)
                             for s in rows)  # fmt: skip
    assert merged.keys() == expected.keys()
    for name, (kind, rows) in expected.items():
        assert merged[name][0] == kind, name
        got = [(s.name, s.labels, s.value) for s in merged[name][1]]
        assert len(got) == len(rows), name
        assert all(g[:2] == r[:2] and same(g[2], r[2]) for g, r in zip(got, rows, strict=True)), name
    assert ("rmqproxy_pull_latency_seconds_bucket" in {s.name for s in merged["rmqproxy_pull_latency_seconds"][1]})
    assert {s.labels.get("worker") for s in merged["odd_gauge"][1]} == {None, "0", "1"}
    assert [s.labels for s in merged["odd_untyped"][1]] == [{"k": "line\nbreak", "worker": "0"},
                                                            {"k": "line\nbreak", "worker": "1"}]  # fmt: skip


def test_the_merged_totals_are_the_sum_of_what_each_worker_served(tmp_path) -> None:
    slots = {slot: worker_metrics(tmp_path / f"worker-{slot}.metrics") for slot in (0, 1)}
    for _ in range(3):
        traffic(slots[0])
    traffic(slots[1])
    expositions = WorkerExpositions()
    for slot, metrics in slots.items():
        expositions.update(slot, snapshot(metrics.registry, slot))
    merged = parsed(expositions.render().decode())
    wakeups = [s for s in merged["rmqproxy_hold_wakeups"][1]]
    assert sum(s.value for s in wakeups) == 4
    assert {s.labels["worker"]: s.value for s in wakeups} == {"0": 3, "1": 1}


def test_a_down_worker_keeps_its_counts_and_loses_its_gauges_until_its_successor_reports(tmp_path) -> None:
    registry = CollectorRegistry()
    metrics = worker_metrics(tmp_path / "worker-0.metrics", registry)
    traffic(metrics)
    Gauge("rmqproxy_held_pulls", "Pulls held now.", registry=registry).set(3)
    expositions = WorkerExpositions()
    expositions.update(0, snapshot(registry, 0))
    expositions.worker_down(0)
    down = parsed(expositions.render().decode())
    assert "rmqproxy_held_pulls" not in down
    assert [s.value for s in down["rmqproxy_hold_wakeups"][1]] == [1]
    assert down["rocketmq_rpc_latency"][1] and down["rmqproxy_client_stats_failures"][1]
    metrics.store.close()
    successor = worker_metrics(tmp_path / "worker-0.metrics")  # continues from the file
    traffic(successor)
    expositions.update(0, snapshot(successor.registry, 0))
    assert [s.value for s in parsed(expositions.render().decode())["rmqproxy_hold_wakeups"][1]] == [2]
    expositions.forget(0)
    assert expositions.render() == b""


@pytest.mark.parametrize("role", ["all", "writer", "keeper"])
def test_the_event_log_series_come_once_each_from_whoever_writes_or_keeps(role: str) -> None:
    """Under ``proxy --workers`` the workers write and the supervisor keeps one folder: a writer
    exports no folder size (each would count all of it), a keeper no drops (it writes nothing)."""
    log = SimpleNamespace(role=role, dropped=3, paused=False, bytes=100, max_bytes=1000, deleted=collections.Counter(age=1),
                          deleted_bytes=10)  # fmt: skip
    registry = CollectorRegistry()
    metrics = Metrics(registry, cluster="c", node_id="n")
    registry.register(LiveState(metrics, holds=SimpleNamespace(max_held=1, held=list), pull_log=log))
    get = registry.get_sample_value
    assert (get("rmqproxy_pull_log_dropped_total") == 3) is (role != "keeper")
    assert (get("rmqproxy_pull_log_bytes") == 100) is (role != "writer")
    assert (get("rmqproxy_pull_log_deleted_files_total", {"reason": "age"}) == 1) is (role != "writer")
