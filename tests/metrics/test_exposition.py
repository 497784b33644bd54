"""``/metrics`` rendered in slices on the reactor (rmqproxy/observe/exposition.py), on task.Clock."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import generate_latest
from twisted.internet import task
from twisted.internet.error import ConnectionDone
from twisted.python.failure import Failure
from twisted.web.server import NOT_DONE_YET
from twisted.web.test.requesthelper import DummyRequest

from codec.bodies import ConsumerRunningInfo
from codec.codes import PullSysFlag
from rmqproxy.observe.exposition import MetricsResource, exposition_slices
from rmqproxy.observe.metrics import LATENCY_BUCKETS, Metrics, ReactorCounter, ReactorHistogram
from rmqproxy.observe.pull_events import PullEvent

from ..server.harness import Client


def busy_registry(groups: int = 300) -> CollectorRegistry:
    """A registry as a busy server's: many groups' pull histograms, counters, a plain
    prometheus_client histogram and counter (with ``_created``), and awkward label values."""
    registry = CollectorRegistry()
    metrics = Metrics(registry, cluster="c", node_id="n", max_label_values=10_000)
    for g in range(groups):
        for wake, held in (("arrival", True), ("timeout", True), ("none", False)):
            metrics.on_pull(PullEvent(
                ts_ms=0, arrived_ms=0, group=f"g{g}", topic=f"T{g % 7}", queue_id=g % 4, client_id="c", remote="a",
                offset=0, max_msgs=32, suspend_ms=1000, held=held, hold_ms=2.0 + g if held else 0.0, service_ms=1.0,
                total_ms=3.0 + g, wake=wake, mode="long", code="SUCCESS" if wake != "timeout" else "PULL_NOT_FOUND",
                msgs=g % 3, bytes=100 * (g % 3), next_offset=0, max_offset=0,
            ))  # fmt: skip
        metrics.on_put(f"T{g % 7}", 1_234_567 * g, 10**9 * g, delayed=False)
    metrics.on_request(10, 0, 0.4)
    odd = ReactorCounter("odd", 'Quotes " and \\ and\nnewlines.', ["v", "z", "a"], registry=registry)
    odd.labels('say "hi"', "back\\slash", "line\nbreak").inc(1e21)
    odd.labels("", "", "")
    ReactorHistogram("empty_seconds", "No children yet.", ["x"], buckets=(1, 2), registry=registry)
    ReactorHistogram("unlabelled_seconds", "No labels.", [], buckets=(1, 2), registry=registry).labels().observe(1.5)
    Histogram("plain_seconds", "A prometheus_client histogram.", ["m"], registry=registry).labels("q").observe(0.3)
    Counter("plain", "A prometheus_client counter (with _created).", registry=registry).inc(2)
    info = ConsumerRunningInfo.from_json(b'{"properties":{},"subscriptionSet":[],"mqTable":{},"statusTable":{"T0":'
                                         b'{"pullRT":1.5,"pullTPS":2.0,"consumeRT":3.0,"consumeOKTPS":4.0,'
                                         b'"consumeFailedTPS":0.0,"consumeFailedMsgs":0}}}')  # fmt: skip
    metrics.on_running_info("g1", "client-1", "127.0.0.1:1", info)
    return registry


def test_slices_make_exactly_what_generate_latest_makes() -> None:
    registry = busy_registry()
    slices = list(exposition_slices(registry, children_per_slice=16))
    assert b"".join(slices) == generate_latest(registry)
    assert len(slices) > 100
    # a slice holds at most 16 label sets of a histogram: 17 lines each (15 buckets and +Inf, _count, _sum... )
    assert max(chunk.count(b"\n") for chunk in slices) <= 16 * (len(LATENCY_BUCKETS) + 3) + 2


def test_a_whole_server_scrapes_as_generate_latest(servers, tmp_path) -> None:
    server, reactor = servers(tmp_path)
    consumer, producer = Client(server, "c@1"), Client(server, "p@1")
    consumer.heartbeat("cg", {"T": "*"})
    producer.send_message("T", b"x")
    consumer.answer(consumer.pull_message("T", 0))
    consumer.pull_message("T", 1, sys_flag=PullSysFlag.SUSPEND)  # held: the live-state gauges have something to say
    request = DummyRequest([b"metrics"])
    assert MetricsResource(server.registry, reactor).render_GET(request) == NOT_DONE_YET
    while not request.finished:
        reactor.advance(0)
    assert b"".join(request.written) == generate_latest(server.registry)
    assert b'rmqproxy_held_pulls{consumer_group="cg",topic="T"} 1.0' in b"".join(request.written)
    assert request.responseHeaders.getRawHeaders(b"content-type")[0].startswith(b"text/plain")


class Turns:
    """A reactor whose turns the test runs one at a time (``callLater(0, f)`` is one more turn)."""

    def __init__(self) -> None:
        self.pending: list = []

    def callLater(self, delay: float, f, *args) -> None:  # noqa: N802 (the reactor's name)
        self.pending.append((f, args))

    def turn(self) -> None:
        f, args = self.pending.pop(0)
        f(*args)


def test_a_scrape_lets_the_reactor_run_between_slices() -> None:
    """With no time budget each reactor turn renders one slice, so a timer due meanwhile runs
    long before the scrape ends (rendered in one call, it ran after the whole scrape)."""
    registry, clock = busy_registry(), task.Clock()
    expected = generate_latest(registry)
    request = DummyRequest([b"metrics"])
    fired: list[int] = []
    clock.callLater(0, lambda: fired.append(len(request.written)))
    MetricsResource(registry, clock, budget_s=0.0).render_GET(request)
    assert len(request.written) == 1 and not request.finished and len(clock.getDelayedCalls()) == 2
    clock.advance(0)
    assert fired == [1]  # after the first slice, not after the last
    assert request.finished and len(request.written) > 50
    assert b"".join(request.written) == expected


def test_the_time_budget_bounds_the_rendering_per_turn() -> None:
    registry, reactor = busy_registry(), Turns()
    ticks = iter(range(10**9))
    request = DummyRequest([b"metrics"])
    # each read of the clock is 1 ms later: a 2.5 ms budget renders three slices a turn
    MetricsResource(registry, reactor, budget_s=0.0025, clock=lambda: next(ticks) / 1000).render_GET(request)
    assert len(request.written) == 3 and len(reactor.pending) == 1
    reactor.turn()
    assert len(request.written) == 6 and len(reactor.pending) == 1
    while reactor.pending:
        reactor.turn()
    assert request.finished and b"".join(request.written) == generate_latest(registry)


def test_a_scraper_that_goes_away_stops_the_rendering() -> None:
    registry, reactor = busy_registry(), Turns()
    request = DummyRequest([b"metrics"])
    MetricsResource(registry, reactor, budget_s=0.0).render_GET(request)
    reactor.turn()
    written = len(request.written)
    request.processingFailed(Failure(ConnectionDone()))  # what a lost connection does to notifyFinish
    reactor.turn()
    assert len(request.written) == written and not reactor.pending and not request.finished
