"""A proxy worker's counters and histograms in its slot's file, continued by its successor after
a SIGKILL (rmqproxy/observe/counter_file.py, ``Metrics(store=...)``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest

from rmqproxy.observe.counter_file import HEADER_BYTES, CounterFile, CounterFileBusy, worker_file
from rmqproxy.observe.metrics import LiveState, Metrics, ReactorCounter, ReactorHistogram
from rmqproxy.observe.pull_events import PullEvent

from ..proxy.test_tls import logged

ROOT = Path(__file__).resolve().parents[2]


def pull(group: str = "g", held: bool = True, wake: str = "timeout") -> PullEvent:
    return PullEvent(
        ts_ms=0, arrived_ms=0, group=group, topic="T", queue_id=0, client_id="c", remote="a", offset=0, max_msgs=32,
        suspend_ms=1000, held=held, hold_ms=1002.0, service_ms=1.0, total_ms=1003.0, wake=wake, mode="long",
        code="PULL_NOT_FOUND", msgs=3, bytes=300, next_offset=0, max_offset=0,
    )  # fmt: skip


def traffic(metrics: Metrics) -> None:
    """One of each hook that counts."""
    metrics.on_pull(pull(), "broker-a")
    metrics.on_pull(pull(held=False, wake="none"), "broker-b")
    metrics.on_request(10, 0, 0.4)
    metrics.on_grpc("SendMessage", "OK", 2.5)
    metrics.on_put("T", 2, 200, delayed=False)
    metrics.on_flush(0.003)
    metrics.on_handoff("g", 0.5)
    metrics.on_running_info_failed("g", "client-1")


def worker_metrics(path: Path, registry: CollectorRegistry | None = None) -> Metrics:
    return Metrics(registry or CollectorRegistry(), cluster="c", node_id="n", broker_label=True,
                   store=CounterFile(str(path)))  # fmt: skip


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in registry.collect() for s in f.samples}


def warnings_while(action: Callable[[], object]) -> list[str]:
    """The metrics-file warnings logged while ``action()`` runs."""
    return [line for line in logged(action) if line.startswith("metrics file ")]


def test_a_file_backed_metrics_exposes_what_an_in_memory_one_does(tmp_path) -> None:
    in_memory = Metrics(CollectorRegistry(), cluster="c", node_id="n", broker_label=True)
    in_file = worker_metrics(tmp_path / "w.metrics")
    for metrics in (in_memory, in_file):
        traffic(metrics)
        traffic(metrics)
    assert generate_latest(in_file.registry) == generate_latest(in_memory.registry)


def test_a_successor_in_the_slot_continues_every_counter_and_histogram(tmp_path) -> None:
    path = tmp_path / worker_file("", 0)
    first = worker_metrics(path)
    traffic(first)
    once = samples(first.registry)
    first.store.close()
    second = worker_metrics(path)
    traffic(second)
    twice = samples(second.registry)
    assert twice == {key: 2 * value for key, value in once.items()}


def test_gauges_come_from_the_new_process_tables_not_the_file(tmp_path) -> None:
    class Holds:
        max_held = 10

        def __init__(self, held: list) -> None:
            self._held = held

        def held(self) -> list:
            return self._held

    first = worker_metrics(tmp_path / "w.metrics")
    held = type("Held", (), {"key": ("T", 0), "group": "g"})()
    first.registry.register(LiveState(first, holds=Holds([held, held])))
    assert first.registry.get_sample_value("rmqproxy_held_pulls", {"topic": "T", "consumer_group": "g"}) == 2
    first.store.close()
    second = worker_metrics(tmp_path / "w.metrics")
    second.registry.register(LiveState(second, holds=Holds([])))
    assert second.registry.get_sample_value("rmqproxy_held_pulls", {"topic": "T", "consumer_group": "g"}) is None


def test_a_worker_killed_with_sigkill_leaves_every_increment_to_its_successor(tmp_path) -> None:
    path = tmp_path / "worker-0.metrics"
    child = subprocess.Popen(
        [sys.executable, "-c", (
            "import sys, tests.metrics.test_counter_file as t\n"
            "m = t.worker_metrics(t.Path(sys.argv[1]))\n"
            "for _ in range(1000): t.traffic(m)\n"
            "print('counted', flush=True)\n"
            "sys.stdin.read()\n"  # stays alive, holding the file, until killed
        ), str(path)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert child.stdout.readline() == b"counted\n"
        with pytest.raises(CounterFileBusy):
            CounterFile(str(path))  # one owner at a time
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdin.close()
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    successor = worker_metrics(path)
    r = successor.registry
    assert r.get_sample_value("rmqproxy_hold_wakeups_total", {"topic": "T", "consumer_group": "g", "wake": "timeout",
                                                              "broker": "broker-a"}) == 1000  # fmt: skip
    assert r.get_sample_value("rocketmq_rpc_latency_count", {"cluster": "c", "node_type": "broker", "node_id": "n",
                              "protocol_type": "remoting", "request_code": "pull_message",
                              "response_code": "pull_not_found", "is_long_polling": "true"}) == 1000  # fmt: skip
    assert r.get_sample_value("rmqproxy_store_flush_seconds_sum") == pytest.approx(3.0)
    traffic(successor)
    assert r.get_sample_value("rmqproxy_client_stats_failures_total", {"group": "g"}) == 1001


def test_a_successors_label_values_count_toward_max_label_values(tmp_path) -> None:
    """Topics and groups the dead worker gave out stay given out: restarts do not widen the file."""
    path = tmp_path / "w.metrics"
    first = Metrics(CollectorRegistry(), cluster="c", node_id="n", max_label_values=2, store=CounterFile(str(path)))
    for group in ("g1", "g2", "g3"):
        first.on_handoff(group, 1.0)
    first.store.close()
    second = Metrics(CollectorRegistry(), cluster="c", node_id="n", max_label_values=2, store=CounterFile(str(path)))
    second.on_handoff("g4", 1.0)
    second.on_handoff("g1", 1.0)
    counts = {s.labels["consumer_group"]: s.value for f in second.registry.collect() for s in f.samples
              if s.name == "rmqproxy_lock_handoff_seconds_count"}  # fmt: skip
    assert counts == {"g1": 2, "g2": 1, "_other": 2}


@pytest.mark.parametrize("content", [b"", b"short", b"X" * 4096, None], ids=["empty", "short", "garbage", "cut"])
def test_a_corrupt_or_short_file_is_reset_with_a_warning(tmp_path, content) -> None:
    path = tmp_path / "w.metrics"
    if content is None:  # a record past the end of the file: the file was cut
        metrics = worker_metrics(path)
        for group in range(50):
            metrics.on_handoff(f"g{group}", 1.0)
        used = metrics.store.used
        metrics.store.close()
        os.truncate(path, (used - 8) & ~7)
    else:
        path.write_bytes(content)
    stores: list[CounterFile] = []
    warned = warnings_while(lambda: stores.append(CounterFile(str(path))))
    assert len(warned) == (0 if content == b"" else 1)
    assert stores[0].used == HEADER_BYTES
    metrics = Metrics(CollectorRegistry(), cluster="c", node_id="n", store=stores[0])
    metrics.on_handoff("g0", 1.0)
    assert metrics.registry.get_sample_value("rmqproxy_lock_handoff_seconds_count", {"consumer_group": "g0"}) == 1


def test_a_record_a_killed_worker_began_is_not_counted(tmp_path) -> None:
    path = tmp_path / "w.metrics"
    store = CounterFile(str(path))
    registry = CollectorRegistry()
    ReactorCounter("x", "X.", ["a"], registry=registry, store=store).labels("one").inc(5)
    used = store.used
    store.close()
    with open(path, "r+b") as f:  # a record written after ``used``, the header not yet moved on
        f.seek(used)
        f.write(b"\xff" * 200)
    store = CounterFile(str(path))
    counter = ReactorCounter("x", "X.", ["a"], registry=CollectorRegistry(), store=store)
    assert counter.labels("one").value == 5
    assert counter.labels("two").value == 0


def test_the_file_grows_by_remapping_and_stops_at_its_bound(tmp_path) -> None:
    path = tmp_path / "w.metrics"
    store = CounterFile(str(path), initial_bytes=1024, max_bytes=64 * 1024)
    counter = ReactorCounter("x", "X.", ["a"], registry=CollectorRegistry(), store=store)
    first = counter.labels("first")
    warned = warnings_while(lambda: [counter.labels(str(n)).inc(n) for n in range(3000)])
    first.inc(7)  # its cells are in the first mapping, the same pages as the last one's
    assert len(warned) == 1  # once, when full
    assert store.size == os.path.getsize(path) == 64 * 1024
    assert counter.labels("2999").value == 2999  # counted in memory past the bound
    store.close()
    again = ReactorCounter("x", "X.", ["a"], registry=CollectorRegistry(), store=CounterFile(str(path)))
    assert again.labels("first").value == 7
    assert again.labels("100").value == 100


def test_a_child_whose_cells_changed_takes_new_ones(tmp_path) -> None:
    """A histogram given other buckets by a new version starts again, its old record left behind."""
    store = CounterFile(str(tmp_path / "w.metrics"))
    ReactorHistogram("h", "H.", [], buckets=(1, 2), registry=CollectorRegistry(), store=store).labels().observe(1.5)
    store.close()
    store = CounterFile(str(tmp_path / "w.metrics"))
    wider = ReactorHistogram("h", "H.", [], buckets=(1, 2, 3), registry=CollectorRegistry(), store=store).labels()
    assert list(wider.counts) == [0, 0, 0, 0] and wider.sum == 0
    wider.observe(2.5)
    store.close()
    store = CounterFile(str(tmp_path / "w.metrics"))
    again = ReactorHistogram("h", "H.", [], buckets=(1, 2, 3), registry=CollectorRegistry(), store=store).labels()
    assert list(again.counts) == [0, 0, 1, 0] and again.sum == 2.5
