"""What every front end shares, built once per process and stopped in order.

A composition root (``serve``'s ``server.Server``, ``proxy``'s ``proxy.server.ProxyServer``, and
the next front end) makes one ``Runtime`` and adds only what is its own. The runtime owns the
metrics registry, the rejection counters, the deadline alarms, the hold service, the pull event
log, the reply-buffer and unfinished-frame bounds, the client connections with the bounds every
front end applies, the listening ports (the ``/metrics`` port among them) and the periodic tasks;
``stop`` ends them in the order that lets every client get its last answers (docs/architecture.md).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterable
from types import SimpleNamespace
from typing import Any

from prometheus_client import CollectorRegistry, disable_created_metrics
from twisted.internet import defer, task
from twisted.internet.interfaces import IListeningPort
from twisted.internet.protocol import Factory
from twisted.logger import Logger
from twisted.web.resource import Resource
from twisted.web.server import Site

from .core.alarm import Alarm, Deadlines, precise_alarm, wall_alarm
from .core.clocks import Wall
from .core.config import Config
from .observe.counter_file import CounterFile
from .observe.exposition import MetricsResource
from .core.hold import HoldService
from .observe.metrics import LiveState, Metrics
from .observe.pull_events import PullLog
from .observe.readiness import Probes, Readiness, ReadyResource
from .net.rejects import Rejections
from .net.replies import ReplyBuffers, WriteBatch
from .net.transport import Connection, Handler
from .net.unfinished import UnfinishedFrames

__all__ = ["NO_HOOKS", "Runtime"]

log = Logger()

#: How long a stopping server waits for its clients' connections to close before it exits.
CLOSE_WAIT_S = 2.0
#: How often a stopping server looks whether the answers still in flight have gone out.
DRAIN_POLL_S = 0.01


def _ignore(*_args: Any) -> None:
    """A metric hook that measures nothing (metricsExporterType=DISABLE)."""


#: The metric hooks of ``metricsExporterType=DISABLE``: the request paths call nothing that measures.
NO_HOOKS = SimpleNamespace(on_flush=_ignore, on_put=_ignore, on_pull=_ignore, on_handoff=_ignore, on_request=_ignore,
                           on_grpc=_ignore)


class Runtime:
    """The shared parts of one server process (see the module docstring)."""

    def __init__(self, config: Config, reactor: Any, *, node_id: str, broker_label: bool = False,
                 wall: Wall = time.time, pull_log: PullLog | None = None,
                 metrics_store: CounterFile | None = None) -> None:  # fmt: skip
        self.config = config
        self.reactor = reactor
        self.wall = wall  # absolute times; every relative wait is on the reactor's (monotonic) clock
        disable_created_metrics()  # RocketMQ and rocketmq-exporter export no *_created series
        self.registry = CollectorRegistry()
        self.metrics = Metrics(self.registry, cluster=config.cluster_name, node_id=node_id, broker_label=broker_label,
                               store=metrics_store)  # fmt: skip
        self.hooks: Any = self.metrics if config.metrics_enabled else NO_HOOKS
        self.rejections = Rejections(reactor.seconds)
        # every deadline alarm on the reactor's clock (held pulls), in sight of the connections
        self.deadlines = Deadlines(reactor.seconds, lambda fire: precise_alarm(reactor, fire))
        self.holds = HoldService(reactor, config.max_held_pulls, config.max_held_pulls_per_connection,
                                 alarm=self.deadlines.alarm)  # fmt: skip
        self.pull_log = pull_log if pull_log is not None else PullLog.of(config)
        self.reply_buffers = ReplyBuffers(config.max_buffered_reply_bytes_per_connection, config.max_buffered_reply_bytes)
        self.unfinished_frames = UnfinishedFrames(reactor, config.max_unfinished_frame_bytes,
                                                  config.frame_stall_timeout_ms / 1000)  # fmt: skip
        self.readiness = Readiness()  # ``GET /ready``: the root says when it is ready; ``stop`` drains
        self.connections: set[Connection] = set()
        self.ports: list[IListeningPort] = []
        self.metrics_port: IListeningPort | None = None  # open until the end of ``stop``: /ready says draining
        self.loops: dict[Callable[[], Any], task.LoopingCall] = {}  # periodic function -> its loop
        self.stopped = False  # ``stop`` has run
        self._all_closed: defer.Deferred | None = None

    def wall_alarm(self, fire: Callable[[], None]) -> Alarm:
        """An alarm at a wall-clock time (timer and delay messages, pop invisibility: due at
        absolute times, as the reference's), which follows a wall-clock step."""
        return wall_alarm(self.reactor, self.wall, fire)

    def watch(self, **tables: Any) -> None:
        """Export the live tables (held pulls, the pull log, rejections, and the root's ``tables``)
        as gauges read at scrape time (``metrics.LiveState``)."""
        self.registry.register(LiveState(self.metrics, holds=self.holds, pull_log=self.pull_log,
                                         rejections=self.rejections, frames=self.unfinished_frames,
                                         **tables))  # fmt: skip

    def connection(self, handler: Handler, on_close: Callable[[Connection], None], *,
                   batch: WriteBatch | None = None) -> Connection:  # fmt: skip
        """A new client connection with the bounds every front end applies (frame size, unfinished
        frames, requests in flight, reply buffers), counted until it closes."""
        config = self.config

        def closed(conn: Connection) -> None:
            self.connections.discard(conn)
            on_close(conn)
            if not self.connections and self._all_closed is not None and not self._all_closed.called:
                self._all_closed.callback(None)

        conn = Connection(
            handler, self.reactor, max_frame_bytes=config.max_frame_size, on_close=closed, on_reject=self.rejections,
            max_in_flight=config.max_in_flight_requests_per_connection, buffers=self.reply_buffers, batch=batch,
            deadlines=self.deadlines, frames=self.unfinished_frames,
        )  # fmt: skip
        self.connections.add(conn)
        return conn

    def listen(self, port: int, factory: Factory) -> IListeningPort:
        """``open_port``, closed by ``stop`` with the runtime's other ports."""
        listening = self.open_port(port, factory)
        self.ports.append(listening)
        return listening

    def adopt(self, sock: socket.socket, factory: Factory) -> IListeningPort:
        """Accept on ``sock``, already bound and listening (its connections queued meanwhile wait
        for this); closed by ``stop`` with the other ports. ``sock`` itself may be closed after."""
        listening: IListeningPort = self.reactor.adoptStreamPort(sock.fileno(), sock.family, factory)
        self.ports.append(listening)
        return listening

    def open_port(self, port: int, factory: Factory) -> IListeningPort:
        """Listen on ``port`` of the bind address with the configured backlog; the caller closes
        it (a proxy node's ports live and die with the node)."""
        listening: IListeningPort = self.reactor.listenTCP(port, factory, backlog=self.config.server_socket_backlog,
                                                           interface=self.config.bind_address)  # fmt: skip
        return listening

    def serve_metrics(self, metrics: Resource | None = None) -> None:
        """``GET /metrics`` on ``metricsPromExporterPort`` (unless 0 or DISABLE), at
        ``metricsPromExporterHost``, the bind address when blank (as a 5.x broker): the
        registry's, or what ``metrics`` renders (a proxy's supervisor: its workers')."""
        config = self.config
        if config.metrics_port and config.metrics_enabled:
            host = config.metrics_host or config.bind_address
            resource = metrics if metrics is not None else MetricsResource(self.registry, self.reactor)
            probes = Probes(resource, ReadyResource(self.readiness))
            site = Site(probes, reactor=self.reactor)  # its log clock too
            self.metrics_port = self.reactor.listenTCP(config.metrics_port, site, interface=host)

    def every(self, tasks: Iterable[tuple[float, Callable[[], Any]]]) -> None:
        """Run each ``(interval, fn)`` every interval seconds from now on (failures are logged)."""
        for interval, fn in tasks:
            loop = task.LoopingCall(fn)
            loop.clock = self.reactor
            self._start(loop, interval)
            self.loops[fn] = loop

    def reschedule(self, fn: Callable[[], Any], interval: float) -> None:
        """Run the periodic ``fn`` every ``interval`` from now on (a runtime config change)."""
        loop = self.loops.get(fn)
        if loop is not None and loop.running and loop.interval != interval:
            loop.stop()  # the next run comes one new interval from now
            self._start(loop, interval)

    @staticmethod
    def _start(loop: task.LoopingCall, interval: float) -> None:
        loop.start(interval, now=False).addErrback(lambda f: log.failure("periodic task failed", f))

    def stop(self, steps: Iterable[Callable[[], Any]] = (), *, first: Iterable[Callable[[], Any]] = (),
             settle: Callable[[], defer.Deferred] | None = None) -> defer.Deferred:  # fmt: skip
        """Stop in the order that lets every client get its last answers (docs/operations.md,
        "Rolling restarts"): /ready says draining; the periodic tasks and listening stop, and the
        root's ``first`` steps (ports of its own); up to ``shutdownDrainTimeoutMillis``, the
        answers still in flight go out (held pulls stay held meanwhile); then held pulls are
        answered, the root's ``steps`` run (each failure logged, the rest still run), the event
        log closes, and the client connections close gracefully, in the same turn. The Deferred
        fires once they are gone and ``settle`` (what the root still owes upstream) has fired,
        at most ``CLOSE_WAIT_S`` later. (A Java 4.9 client does not fail requests pending on a
        closed connection: a held pull answered before the close would let it pull again on a
        connection that no longer reads, and wait out its 30 s pull timeout after the restart.)"""
        self.stopped = True
        self.readiness.drain()
        for loop in self.loops.values():
            if loop.running:
                loop.stop()
        for port in self.ports:
            port.stopListening()
        self._run_steps(first)
        began = self.reactor.seconds()
        drained = self._in_flight_answered(self.config.shutdown_drain_timeout_ms / 1000)
        return drained.addCallback(lambda _: self._close((self._log_drained(began), self.holds.shutdown, *steps), settle))

    def _log_drained(self, began: float) -> Callable[[], None]:
        """The stop step that says the drain is done and what is left to close, for the operator's
        (and the rolling-restart test's) record of every stop."""

        def drained() -> None:
            log.info("stopping: drained in {s:.2f} s; answering {held} held pulls, closing {n} client connections",
                     s=self.reactor.seconds() - began, held=len(self.holds.held()), n=len(self.connections))  # fmt: skip

        return drained

    def _run_steps(self, steps: Iterable[Callable[[], Any]]) -> None:
        for step in steps:
            try:
                step()
            except Exception:  # whatever fails, the steps after it still run
                log.failure("stopping: {step} failed", step=getattr(step, "__qualname__", step))

    def _in_flight_answered(self, timeout_s: float) -> defer.Deferred:
        """Fires once no client connection awaits an answer but its held pulls (at once if none
        does), or after ``timeout_s``."""
        done: defer.Deferred = defer.Deferred()
        deadline = self.reactor.seconds() + timeout_s
        holds = self.holds

        def check() -> None:
            waiting = sum(conn.in_flight - holds.held_by(conn) for conn in self.connections if conn.connected)
            if not waiting:
                done.callback(None)
            elif self.reactor.seconds() >= deadline:
                log.warn("stopping: {n} answers still in flight after {s:g} s (shutdownDrainTimeoutMillis); "
                         "closing anyway", n=waiting, s=timeout_s)  # fmt: skip
                done.callback(None)
            else:
                self.reactor.callLater(DRAIN_POLL_S, check)

        check()
        return done

    def _close(self, steps: Iterable[Callable[[], Any]], settle: Callable[[], defer.Deferred] | None) -> defer.Deferred:
        self._run_steps((*steps, self.pull_log.close))
        self._all_closed = all_closed = defer.Deferred()
        if not self.connections:
            all_closed.callback(None)
        for conn in list(self.connections):
            conn.close()
        if settle is not None:  # asked once the clients are gone: their departure is what it settles
            all_closed.addCallback(lambda _: settle())
        finished: defer.Deferred = defer.Deferred()

        def end(_: Any = None) -> None:
            if not finished.called:
                if self.metrics_port is not None:
                    self.metrics_port.stopListening()
                finished.callback(None)

        timeout = self.reactor.callLater(CLOSE_WAIT_S, end)
        all_closed.addBoth(end)
        return finished.addBoth(lambda _: timeout.cancel() if timeout.active() else None)
