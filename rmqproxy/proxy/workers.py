"""``rmqproxy proxy --workers N``: a supervisor and N worker processes that share its ports.

One Python process relays on one core. With N workers the proxy is N processes, each with its
own reactor, client connections, upstream connections and held pulls, and one supervisor that
the operator sees as the proxy:

- It owns the name-server port (``front``) and gives each upstream broker node its ports, as a
  single proxy does; for each port it binds one listening socket and hands it to every worker
  over the control channel (``control``), so all workers accept from the same queue and a
  broker has the same port in every worker, also one that appears later. A worker restarted
  gets every socket again; connections that arrive while it is down go to the others.
- It serves ``/metrics`` and ``/ready``: a scrape asks every worker for its exposition and
  renders them together, each series labelled with its ``worker`` (``observe.worker_metrics``).
- It keeps the pull event log's directory (retention, compaction); the workers only write
  their own files in it.
- It tells the workers when a client that holds queue locks is gone from all of them
  (``handoff``: a client has a connection per broker, and they may sit in different workers).
- It restarts a worker that dies (only that worker's clients reconnect), and on SIGTERM stops
  accepting, asks every worker to drain as a single proxy does, and exits after the last.

The bounds that are totals for the proxy are split evenly among the workers
(``worker.worker_share``).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from twisted.internet import defer, protocol
from twisted.internet.error import CannotListenError
from twisted.internet.protocol import Factory
from twisted.logger import Logger
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET

from ..core.clocks import Wall
from ..core.config import Config
from ..observe.pull_events import PullLog
from ..observe.worker_metrics import WorkerExpositions
from ..net.replies import WriteBatch
from ..net.tls import TlsSettings, sniffing_factory
from ..net.tls_client import UpstreamTls
from ..net.transport import Connection
from ..runtime import Runtime
from .control import WORKER_FD, Control, Message
from .front import NameServerFront, check_proxy_config
from .nodes import Node, NodeDirectory, parse_port_range
from .upstream import Dialer, NameServers

__all__ = ["RESTART_MAX_S", "SCRAPE_TIMEOUT_S", "Supervisor", "worker_count"]

log = Logger()

#: A worker that dies is started again after this long, doubled while it keeps dying young.
RESTART_FIRST_S = 0.2
RESTART_MAX_S = 10.0
#: A worker that lived this long before it died is started again after ``RESTART_FIRST_S``.
RESTART_RESET_S = 30.0
#: How long a scrape waits for the workers' expositions (a worker that is late shows its last).
SCRAPE_TIMEOUT_S = 5.0
#: After its drain timeout and the clients' close, how long a stopping worker has to exit before it is killed.
EXIT_GRACE_S = 5.0


def worker_count(config: Config) -> int:
    """``workers``, where 0 means one per core."""
    return config.workers or os.cpu_count() or 1


def counters_dir() -> str:
    """A new folder for the workers' counter files, ``rmqproxy-workers-<pid>-*`` in the temporary
    folder; those of supervisors no longer running (killed outright) are removed first."""
    tmp = tempfile.gettempdir()
    for name in os.listdir(tmp):
        parts = name.split("-")
        if name.startswith("rmqproxy-workers-") and len(parts) > 3 and parts[2].isdigit():
            try:
                os.kill(int(parts[2]), 0)
            except ProcessLookupError:
                shutil.rmtree(os.path.join(tmp, name), ignore_errors=True)
            except OSError:
                pass  # alive (another user's)
    return tempfile.mkdtemp(prefix=f"rmqproxy-workers-{os.getpid()}-")


def listening_socket(host: str, port: int, backlog: int) -> socket.socket:
    """A non-blocking TCP socket bound to ``host:port`` and listening (CannotListenError if it cannot)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise CannotListenError(host, port, exc) from None
    return sock


class _BoundPort:
    """A node port's listening socket, as ``NodeDirectory`` holds a listener (it only stops it)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def stopListening(self) -> None:
        """Stop the port for every worker at once: a shutdown ends the listen of the socket all copies
        share, so a connect is refused now, not queued unaccepted until the last worker closes its copy
        and then reset (a 4.9 client's sync send on it waits out its 3 s timeout)."""
        try:
            self.sock.shutdown(socket.SHUT_RD)
        except OSError:
            pass  # not listening (any more)
        self.sock.close()


class _Clients(Factory):
    """Client connections of the name-server port."""

    noisy = False

    def __init__(self, runtime: Runtime, handler: Any) -> None:
        self.runtime = runtime
        self.handler = handler
        self.batch = WriteBatch()

    def buildProtocol(self, addr: Any) -> Connection:
        return self.runtime.connection(self.handler, lambda conn: None, batch=self.batch)



class _WorkerProcess(protocol.ProcessProtocol):
    """One worker process: its slot, pid and channel, until it ends."""

    def __init__(self, supervisor: Supervisor, slot: int, control: Control, started: float) -> None:
        self.supervisor = supervisor
        self.slot = slot
        self.control = control
        self.started = started
        self.greeted = False  # it said hello: it has (or is being sent) every port

    def processEnded(self, reason: Any) -> None:
        self.supervisor._ended(self, reason.value)


class Supervisor:
    """The proxy as N worker processes (see the module doc); ``argv`` are the proxy command's
    arguments, which each worker is started with, plus its slot."""

    def __init__(self, config: Config, reactor: Any, argv: Sequence[str], workers: int, wall: Wall = time.time) -> None:
        check_proxy_config(config)
        self.config = config
        self.reactor = reactor
        self.argv = list(argv)
        self.count = workers
        # it holds no pulls: its limit is 0, so the workers' shares add up to maxHeldPulls in /metrics
        self.runtime = runtime = Runtime(dataclasses.replace(config, max_held_pulls=0), reactor, node_id="rmqproxy-proxy",
                                         broker_label=True, wall=wall, pull_log=PullLog.keeper_of(config))  # fmt: skip
        runtime.watch()
        self.tls = TlsSettings.of(config)
        self.dialer = Dialer(reactor, max_frame_bytes=config.max_frame_size, timeout_s=config.proxy_request_timeout_ms / 1000,
                             deadlines=runtime.deadlines, frames=runtime.unfinished_frames, tls=UpstreamTls.of(config))  # fmt: skip
        nodes = NodeDirectory(parse_port_range(config.proxy_broker_ports, config.listen_port), config.advertised_host,
                              self._bind, fast=config.fast_port_enable, moved=self._moved)  # fmt: skip
        self.front = NameServerFront(config, reactor, NameServers(self.dialer, config.namesrv_addr), nodes)
        self.ports: list[tuple[Node, int, socket.socket]] = []  # every node port's socket, in the order bound
        self.workers: dict[int, _WorkerProcess] = {}  # slot -> its running process
        self.clients: dict[str, set[int]] = {}  # client id -> the slots it has a connection in
        self.metrics = WorkerExpositions()
        self.dir = counters_dir()  # each slot's counter file (``counter_file``)
        self._scrapes: dict[int, tuple[set[int], defer.Deferred]] = {}  # scrape number -> slots not answered yet
        self._scrape_number = 0
        self._restart_after: dict[int, float] = {}  # slot -> its next restart delay
        self._primed = False
        self._namesrv_sock: socket.socket | None = None  # bound, until every worker is up and it accepts
        self._stopping = False
        self._exited: defer.Deferred | None = None  # fires once every worker has ended (stopping)

    # --- start and stop ---------------------------------------------------------------------

    def start(self) -> defer.Deferred:
        """Bind the name-server port, serve /metrics, start the workers and read the cluster.
        The name-server port accepts once every worker is up, so a client given a route finds a
        worker on its port (until then its connection waits in the port's queue)."""
        config = self.config
        self._namesrv_sock = listening_socket(config.bind_address, config.listen_port, config.server_socket_backlog)
        self.runtime.serve_metrics(_GatheredMetrics(self.metrics, self.runtime.registry, self._gather))
        for slot in range(1, self.count + 1):
            self._spawn(slot)
        readiness = self.runtime.readiness

        def primed() -> None:
            self._primed = True
            self._check_ready()

        return self.front.prime(primed, readiness.waiting, lambda: self._stopping)

    def _check_ready(self) -> None:
        greeted = sum(1 for w in self.workers.values() if w.greeted)
        if greeted == self.count and self._namesrv_sock is not None and not self._stopping:
            sock, self._namesrv_sock = self._namesrv_sock, None
            clients = sniffing_factory(_Clients(self.runtime, self.front.request), self.tls, self.reactor)
            self.front.listen(self.runtime, clients, self.tls, self.dialer, self.count, sock=sock)
            sock.close()  # the reactor has its own copy
        if self._primed and greeted == self.count:
            self.runtime.readiness.set_ready()
        else:
            self.runtime.readiness.waiting(f"{greeted} of {self.count} workers are up" if self._primed else
                                           "reading the cluster from the upstream name servers")  # fmt: skip

    def stop(self) -> defer.Deferred:
        """Stop accepting (the name-server port, then every node port in every worker: each worker
        is sent SIGTERM and drains as a single proxy does), and fire once every worker has exited."""
        self._stopping = True
        self._exited = defer.Deferred()
        for worker in self.workers.values():
            self._signal(worker, signal.SIGTERM)
        grace = self.config.shutdown_drain_timeout_ms / 1000 + EXIT_GRACE_S
        kill = self.reactor.callLater(grace, self._kill_all)
        if not self.workers:
            shutil.rmtree(self.dir, ignore_errors=True)
            self._exited.callback(None)
        stopped = self.runtime.stop([self.front.close], first=[self.front.nodes.close])
        exited = self._exited.addBoth(lambda _: kill.cancel() if kill.active() else None)
        return defer.gatherResults([stopped, exited], consumeErrors=True).addBoth(lambda _: None)

    def _kill_all(self) -> None:
        for worker in list(self.workers.values()):
            log.warn("worker {slot} has not exited; killing it", slot=worker.slot)
            self._signal(worker, signal.SIGKILL)

    @staticmethod
    def _signal(worker: _WorkerProcess, sig: int) -> None:
        try:
            worker.transport.signalProcess(sig)
        except Exception:  # already gone: its processEnded is on the way
            pass

    # --- the workers ------------------------------------------------------------------------

    def _spawn(self, slot: int) -> None:
        """Start the worker of ``slot`` with its end of a new channel as ``WORKER_FD``."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        control = Control(lambda message, fds: self._received(slot, message, fds), lambda: None)
        worker = _WorkerProcess(self, slot, control, self.reactor.seconds())
        try:
            control.adopt(self.reactor, ours.fileno())
            args = [sys.executable, "-m", "rmqproxy.cli", "proxy", *self.argv, "--worker-slot", str(slot),
                    "--worker-dir", self.dir]  # fmt: skip
            self.reactor.spawnProcess(worker, sys.executable, args, env=dict(os.environ),
                                      childFDs={1: 1, 2: 2, WORKER_FD: theirs.fileno()})  # fmt: skip
        finally:
            ours.close()
            theirs.close()
        self.workers[slot] = worker

    def _ended(self, worker: _WorkerProcess, reason: Any) -> None:
        slot = worker.slot
        if self.workers.get(slot) is worker:
            del self.workers[slot]
        if worker.control.transport is not None:
            worker.control.transport.loseConnection()
        self.metrics.worker_down(slot)  # its counts stay in /metrics; its gauges went with it
        for client_id in [c for c, slots in self.clients.items() if slot in slots]:
            self._client_left(slot, client_id)  # its clients' connections died with it
        if self._stopping:
            if not self.workers and self._exited is not None and not self._exited.called:
                shutil.rmtree(self.dir, ignore_errors=True)
                self._exited.callback(None)
            return
        lived = self.reactor.seconds() - worker.started
        delay = RESTART_FIRST_S if lived >= RESTART_RESET_S else self._restart_after.get(slot, RESTART_FIRST_S)
        self._restart_after[slot] = min(delay * 2, RESTART_MAX_S)
        log.error("worker {slot} ended ({reason}) after {lived:.1f} s; starting it again in {delay:g} s", slot=slot,
                  reason=reason, lived=lived, delay=delay)  # fmt: skip
        self._check_ready()
        self.reactor.callLater(delay, self._respawn, slot)

    def _respawn(self, slot: int) -> None:
        if not self._stopping and slot not in self.workers:
            self._spawn(slot)

    def _received(self, slot: int, message: Message, fds: list[int]) -> None:
        for fd in fds:
            os.close(fd)  # a worker sends none
        worker = self.workers.get(slot)
        if worker is None:
            return
        op = message.get("op")
        if op == "hello":
            worker.greeted = True
            for node, port, sock in self.ports:
                self._send_port(worker, node, port, sock)
            log.info("worker {slot} is up (pid {pid})", slot=slot, pid=message.get("pid"))
            self._check_ready()
        elif op == "metrics":
            self._scraped(slot, message.get("n"), message.get("payload", b""))
        elif op == "live":
            self.clients.setdefault(message["client"], set()).add(slot)
        elif op == "gone":
            self._client_left(slot, message["client"])
        else:
            log.warn("control channel: unknown message {op!r} from worker {slot}", op=op, slot=slot)

    def _client_left(self, slot: int, client_id: str) -> None:
        """``client_id``'s last connection in ``slot`` closed: once it has none in any worker,
        every worker may release its queue locks."""
        slots = self.clients.get(client_id)
        if slots is not None:
            slots.discard(slot)
            if slots:
                return
            del self.clients[client_id]
        for worker in self.workers.values():
            worker.control.send({"op": "release", "client": client_id})

    # --- node ports -------------------------------------------------------------------------

    def _bind(self, node: Node, port: int) -> _BoundPort:
        """Bind and listen on ``port`` for ``node``, and hand the socket to every worker."""
        sock = listening_socket(self.config.bind_address, port, self.config.server_socket_backlog)
        self.ports.append((node, port, sock))
        for worker in self.workers.values():
            if worker.greeted:
                self._send_port(worker, node, port, sock)
        return _BoundPort(sock)

    @staticmethod
    def _send_port(worker: _WorkerProcess, node: Node, port: int, sock: socket.socket) -> None:
        if sock.fileno() < 0:
            return  # closed: the proxy is stopping
        worker.control.send({"op": "listen", "name": node.name, "id": node.broker_id, "upstream": node.upstream,
                             "port": node.port, "fast": node.fast_port, "address": node.address,
                             "family": int(sock.family), "listen_on": port}, [sock.fileno()])  # fmt: skip

    def _moved(self, node: Node) -> None:
        for worker in self.workers.values():
            worker.control.send({"op": "moved", "name": node.name, "id": node.broker_id, "upstream": node.upstream})

    # --- metrics ----------------------------------------------------------------------------

    def _gather(self) -> defer.Deferred:
        """Ask every running worker for its exposition; fires when all answered, or after
        ``SCRAPE_TIMEOUT_S`` (a late worker shows its last exposition)."""
        self._scrape_number += 1
        number = self._scrape_number
        waiting = {slot for slot, w in self.workers.items() if w.greeted}
        done: defer.Deferred = defer.Deferred()
        if not waiting:
            return defer.succeed(None)
        self._scrapes[number] = (waiting, done)
        for slot in waiting:
            self.workers[slot].control.send({"op": "scrape", "n": number})

        def late() -> None:
            if self._scrapes.pop(number, None) is not None:
                done.callback(None)

        timer = self.reactor.callLater(SCRAPE_TIMEOUT_S, late)
        return done.addBoth(lambda result: (timer.cancel() if timer.active() else None, result)[1])

    def _scraped(self, slot: int, number: Any, text: bytes) -> None:
        self.metrics.update(slot, text)
        pending = self._scrapes.get(number)
        if pending is not None:
            waiting, done = pending
            waiting.discard(slot)
            if not waiting:
                del self._scrapes[number]
                done.callback(None)


class _GatheredMetrics(Resource):
    isLeaf = True

    """``GET /metrics`` of the supervisor: gather the workers' expositions, then render them with
    the supervisor's own registry as one (``WorkerExpositions.render``)."""

    def __init__(self, expositions: WorkerExpositions, own: CollectorRegistry,
                 gather: Callable[[], defer.Deferred]) -> None:  # fmt: skip
        super().__init__()
        self.expositions = expositions
        self.own = own
        self.gather = gather

    def render_GET(self, request: Any) -> Any:
        request.setHeader(b"Content-Type", CONTENT_TYPE_LATEST.encode())
        gone: list[Any] = []
        request.notifyFinish().addBoth(gone.append)

        def write(_: Any) -> None:
            if not gone:
                request.write(self.expositions.render(self.own))
                request.finish()

        self.gather().addCallback(write).addErrback(lambda f: log.failure("rendering /metrics failed", f))
        return NOT_DONE_YET
