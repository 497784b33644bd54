"""Proxy mode's composition root: ``rmqproxy proxy`` in front of an Apache RocketMQ cluster.

The name-server port (``front``) forwards every request to the upstream name servers and rewrites
the broker addresses of route and cluster-info answers to the proxy's own listeners (``routes``,
``nodes``). With ``--workers N`` a supervisor (``workers``) owns that port and the listeners, and
N processes of this root, each a worker, accept on the listeners (``worker``).
Each listener stands for one upstream broker node; each client connection on it gets a
``BrokerSession`` with its own upstream connection. There is no store: what the proxy keeps is
per connection (sessions, pull slots) or bounded (held pulls, kept answers, lock records).
Every listener serves TLS per ``tls.server.mode`` as ``serve``'s do (``net.tls``), and with
``tls.enable`` every upstream dial is TLS (``net.tls_client``, through the ``Dialer``).
docs/architecture.md, "Proxy mode", says why it is built this way.
"""

from __future__ import annotations

import time
from typing import Any

from twisted.internet import defer
from twisted.internet.interfaces import IListeningPort
from twisted.internet.protocol import Factory
from twisted.logger import Logger

from codec import implementation as codec_implementation
from codec.codes import RequestCode
from codec.command import RemotingCommand

from ..core.clocks import Wall
from ..core.config import Config
from ..observe.counter_file import CounterFile, worker_file
from ..observe.pull_events import PullEvent, PullLog
from ..runtime import Runtime
from ..net.replies import WriteBatch
from ..net.tls import TlsSettings, sniffing_factory
from ..net.tls_client import UpstreamTls
from ..net.transport import Connection
from .handoff import LockHandoff
from .front import NameServerFront, check_proxy_config
from .nodes import Node, NodeDirectory, parse_port_range
from .session import BrokerSession
from .shared import MAX_STASH_BYTES, Relaying, StashBudget
from .upstream import Dialer, NameServers
from .worker import WorkerLink, worker_share

log = Logger()

#: Weight of the newest round trip in a node's service-time estimate.
SERVICE_EWMA = 0.1
_PULLS = (RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE)


class _ConnectionFactory(Factory):
    """Client connections of one listener, served by ``handler``; on a broker listener (or its
    fast port) each gets its ``BrokerSession``."""

    noisy = False

    def __init__(self, proxy: ProxyServer, handler: Any, node: Node | None) -> None:
        self.proxy = proxy
        self.handler = handler
        self.node = node

    def buildProtocol(self, addr: Any) -> Connection:
        proxy = self.proxy
        conn = proxy.runtime.connection(self.handler, proxy.closed, batch=proxy.batch)
        if self.node is not None:
            proxy.sessions[conn] = BrokerSession(proxy.relaying, self.node, conn)
        return conn


class ProxyServer:
    """``rmqproxy proxy`` in one process: the name-server port and a listener per upstream broker
    node. As one worker of ``--workers N`` (``worker``: its slot, 1..N) it serves only the broker
    listeners, which the supervisor hands it (``worker.WorkerLink``), with its share of the bounds."""

    def __init__(self, config: Config, reactor: Any, wall: Wall = time.time, *, worker: int = 0,
                 workers: int = 1, worker_dir: str = "") -> None:  # fmt: skip
        check_proxy_config(config)
        if worker:
            config = worker_share(config, workers)
        self.config = config
        self.reactor = reactor
        self.timeout_s = config.proxy_request_timeout_ms / 1000
        counters = CounterFile(worker_file(worker_dir, worker)) if worker and worker_dir else None
        self.runtime = runtime = Runtime(config, reactor, node_id="rmqproxy-proxy", broker_label=True, wall=wall,
                                         pull_log=PullLog.of(config, worker=worker) if worker else None,
                                         metrics_store=counters)  # fmt: skip
        self.metrics, self.holds = runtime.metrics, runtime.holds
        runtime.watch()
        self.tls = TlsSettings.of(config)  # the client side: its ports, as ``serve`` serves TLS
        self.batch = WriteBatch()
        self.dialer = Dialer(reactor, max_frame_bytes=config.max_frame_size, timeout_s=self.timeout_s, batch=self.batch,
                             deadlines=runtime.deadlines, frames=runtime.unfinished_frames,
                             tls=UpstreamTls.of(config))  # fmt: skip
        self.link = WorkerLink.of_registry(worker, reactor, self.node_factory, runtime.registry) if worker else None
        self.front: NameServerFront | None = None
        if not worker:
            nodes = NodeDirectory(parse_port_range(config.proxy_broker_ports, config.listen_port),
                                  config.advertised_host, self._listen_node, fast=config.fast_port_enable)  # fmt: skip
            self.front = NameServerFront(config, reactor, NameServers(self.dialer, config.namesrv_addr), nodes)
        self.handoff = LockHandoff(reactor, immediate=config.lock_release_on_disconnect == "immediate",
                                   timeout_s=self.timeout_s, peers=self.link)  # fmt: skip
        if self.link is not None:
            self.link.released = self.handoff.released
        self.stash = StashBudget(MAX_STASH_BYTES // max(1, workers))  # late upstream answers kept for their clients' next pulls
        self.relaying = Relaying(clock=reactor, wall=wall, dialer=self.dialer, timeout_s=self.timeout_s,
                                 holds=self.holds, max_suspend_s=config.max_pull_suspend_ms / 1000, stash=self.stash,
                                 handoff=self.handoff, answered=self.answered, pulled=self.pulled,
                                 rejected=runtime.rejections)  # fmt: skip
        self.sessions: dict[Connection, BrokerSession] = {}

    # --- start and stop ---------------------------------------------------------------------

    def start(self) -> Any:
        """Listen on the name-server port (and /metrics), then give the cluster's brokers their
        ports in sorted order; the Deferred fires when that is done (or failed: ports are then
        given as routes name them). A worker instead opens its channel to the supervisor, which
        sends it the ports."""
        self.runtime.every([(0.5, self.runtime.pull_log.flush), (10.0, self._sweep)])
        if self.link is not None:
            self.link.start()
            log.info("rmqproxy proxy worker {slot} serving the broker ports, codec {codec}", slot=self.link.slot,
                     codec=codec_implementation.describe())  # fmt: skip
            return defer.succeed(None)
        assert self.front is not None
        self.front.listen(self.runtime, self._factory(self.front.request, None), self.tls, self.dialer)
        self.runtime.serve_metrics()
        return self._prime()

    def _prime(self) -> defer.Deferred:
        """Read the cluster (``front.prime``); the proxy is ready (``/ready``) once it has."""
        assert self.front is not None
        readiness = self.runtime.readiness
        return self.front.prime(readiness.set_ready, readiness.waiting, lambda: self.runtime.stopped)

    def _listen_node(self, node: Node, port: int) -> IListeningPort:
        """Listen on ``port`` (the node's port or its fast port) for connections relayed to ``node``."""
        return self.runtime.open_port(port, self._factory(self._broker_request, node))

    def _factory(self, handler: Any, node: Node | None) -> Factory:
        """Client connections served by ``handler`` (relayed to ``node``), TLS or plain per ``tls.server.mode``."""
        return sniffing_factory(_ConnectionFactory(self, handler, node), self.tls, self.reactor)

    def node_factory(self, node: Node) -> Factory:
        """Client connections relayed to ``node`` (a worker's listeners, ``worker.WorkerLink``)."""
        return self._factory(self._broker_request, node)

    def stop(self) -> defer.Deferred:
        """Stop accepting on every port, answer held pulls (PULL_NOT_FOUND), let the answers in
        flight reach their clients, close the clients and the name-server link, and wait for the
        departed clients' queue locks to be released upstream (``Runtime.stop``)."""
        if self.link is not None:
            link = self.link  # open till the end: the departed clients' ``gone`` out, the supervisor's ``release`` in
            return self.runtime.stop(first=[link.stop_listening], settle=self.handoff.settled).addBoth(
                lambda result: (link.close(), result)[1])  # fmt: skip
        assert self.front is not None
        return self.runtime.stop([self.front.close], first=[self.front.nodes.close], settle=self.handoff.settled)

    # --- broker listeners -------------------------------------------------------------------

    def _broker_request(self, request: RemotingCommand, conn: Connection) -> Any:
        return self.sessions[conn].handle(request)

    def closed(self, conn: Connection) -> None:
        """A client connection closed: so does its session."""
        session = self.sessions.pop(conn, None)
        if session is not None:
            session.closed()

    def answered(self, node: Node, request_code: int, response_code: int, elapsed_ms: float) -> None:
        """A relayed request was answered: measure it, and learn the node's service time from it."""
        self.metrics.on_request(request_code, response_code, elapsed_ms)
        if request_code not in _PULLS:
            node.service_ms += SERVICE_EWMA * (elapsed_ms - node.service_ms)

    def pulled(self, node: Node, event: PullEvent) -> None:
        """A client pull was answered (``pulls.PullRelay``)."""
        self.runtime.pull_log(event)
        if self.config.metrics_enabled:
            self.metrics.on_pull(event, node.label)

    def _sweep(self) -> None:
        for session in list(self.sessions.values()):
            session.pulls.sweep()
