"""Proxy mode's composition root: ``rmqproxy proxy`` in front of an Apache RocketMQ cluster.

The name-server port forwards every request to the upstream name servers and rewrites the broker
addresses of route and cluster-info answers to the proxy's own listeners (``routes``, ``nodes``).
Each listener stands for one upstream broker node; each client connection on it gets a
``BrokerSession`` with its own upstream connection. There is no store: what the proxy keeps is
per connection (sessions, pull slots) or bounded (held pulls, kept answers, lock records).
docs/architecture.md, "Proxy mode", says why it is built this way.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from prometheus_client import CollectorRegistry, disable_created_metrics
from twisted.internet import defer, task
from twisted.internet.interfaces import IListeningPort
from twisted.internet.protocol import Factory
from twisted.logger import Logger
from twisted.web.server import Site

from codec.codes import RequestCode, ResponseCode
from codec.command import RemotingCommand
from codec.errors import CodecError

from ..alarm import Deadlines, precise_alarm
from ..config import SETTINGS, Config
from ..hold import HoldService
from ..exposition import MetricsResource
from ..metrics import LiveState, Metrics
from ..pulllog import PullEvent, PullLog
from ..rejects import Rejections
from ..transport import Connection, ReplyBuffers, WriteBatch
from .handoff import LockHandoff
from .nodes import NoFreePort, Node, NodeDirectory, parse_port_range
from .routes import cluster_nodes, rewrite_cluster_info, rewrite_route
from .session import BrokerSession
from .upstream import Dialer, NameServers, UpstreamError, relabel

log = Logger()

#: Weight of the newest round trip in a node's service-time estimate.
SERVICE_EWMA = 0.1
_PULLS = (RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE)


class _ConnectionFactory(Factory):
    """Client connections of one listener, served by ``handler``; on a broker listener each gets
    its ``BrokerSession``."""

    noisy = False

    def __init__(self, proxy: ProxyServer, handler: Any, node: Node | None) -> None:
        self.proxy = proxy
        self.handler = handler
        self.node = node

    def buildProtocol(self, addr: Any) -> Connection:
        proxy = self.proxy
        conn = Connection(
            self.handler, proxy.reactor, max_frame_bytes=proxy.config.max_frame_size, on_close=proxy.closed,
            on_reject=proxy.rejections, max_in_flight=proxy.config.max_in_flight_requests_per_connection,
            buffers=proxy.reply_buffers, batch=proxy.batch, deadlines=proxy.deadlines,
        )  # fmt: skip
        proxy.connections.add(conn)
        if self.node is not None:
            proxy.sessions[conn] = BrokerSession(proxy, self.node, conn)
        return conn


class ProxyServer:
    def __init__(self, config: Config, reactor: Any) -> None:
        if not config.namesrv_addr.strip():
            raise ValueError("proxy mode needs the upstream name servers: --namesrv-addr host:port[;host:port...]")
        self.config = config
        self.reactor = reactor
        self.timeout_s = config.proxy_request_timeout_ms / 1000
        disable_created_metrics()
        self.registry = CollectorRegistry()
        self.metrics = Metrics(self.registry, cluster=config.cluster_name, node_id="rmqproxy-proxy", broker_label=True)
        self.rejections = Rejections(reactor.seconds)
        # the held pulls' deadline alarm, in sight of the connections
        self.deadlines = Deadlines(reactor.seconds, lambda fire: precise_alarm(reactor, fire))
        self.holds = HoldService(reactor, config.max_held_pulls, config.max_held_pulls_per_connection,
                                 alarm=self.deadlines.alarm)  # fmt: skip
        self.pull_log = PullLog(config.pull_log_dir, config.pull_log_mode)
        self.registry.register(LiveState(self.metrics, holds=self.holds, pull_log=self.pull_log,
                                         rejections=self.rejections))  # fmt: skip
        self.batch = WriteBatch()
        self.dialer = Dialer(reactor, max_frame_bytes=config.max_frame_size, timeout_s=self.timeout_s, batch=self.batch,
                             deadlines=self.deadlines)  # fmt: skip
        self.namesrvs = NameServers(self.dialer, config.namesrv_addr)
        self.nodes = NodeDirectory(parse_port_range(config.proxy_broker_ports, config.listen_port),
                                   config.advertised_host, self._listen_node, fast=config.fast_port_enable)  # fmt: skip
        self.handoff = LockHandoff(reactor, immediate=config.lock_release_on_disconnect == "immediate",
                                   timeout_s=self.timeout_s)  # fmt: skip
        self.reply_buffers = ReplyBuffers(config.max_buffered_reply_bytes_per_connection, config.max_buffered_reply_bytes)
        self.sessions: dict[Connection, BrokerSession] = {}
        self.connections: set[Connection] = set()
        self.ports: list[IListeningPort] = []
        self.stash_bytes = 0  # bytes of late upstream answers kept for their clients' next pulls
        self._loops: list[task.LoopingCall] = []

    # --- start and stop ---------------------------------------------------------------------

    def start(self) -> Any:
        """Listen on the name-server port (and /metrics), then give the cluster's brokers their
        ports in sorted order; the Deferred fires when that is done (or failed: ports are then
        given as routes name the brokers)."""
        config = self.config
        self.ports.append(self.reactor.listenTCP(
            config.listen_port, _ConnectionFactory(self, self._namesrv_request, None),
            backlog=config.server_socket_backlog, interface=config.bind_address,
        ))  # fmt: skip
        if config.metrics_port and config.metrics_enabled:
            host = config.metrics_host or config.bind_address
            self.ports.append(self.reactor.listenTCP(config.metrics_port, Site(MetricsResource(self.registry, self.reactor)),
                                                     interface=host))  # fmt: skip
        for interval, fn in ((0.5, self.pull_log.flush), (10.0, self._sweep)):
            loop = task.LoopingCall(fn)
            loop.clock = self.reactor
            loop.start(interval, now=False).addErrback(lambda f: log.failure("periodic task failed", f))
            self._loops.append(loop)
        unused = sorted({s.key for s in SETTINGS if not s.proxy and getattr(config, s.field) != s.default} | set(config.extra))
        if unused:
            log.warn("keys proxy mode does not use, ignored: {keys}", keys=", ".join(unused))
        log.info("rmqproxy proxy listening on {host}:{port} (name server) in front of {upstream}",
                 host=config.bind_address, port=config.listen_port, upstream=config.namesrv_addr)  # fmt: skip
        return self._prime()

    def _prime(self) -> defer.Deferred:
        request = RemotingCommand(RequestCode.GET_BROKER_CLUSTER_INFO)

        def primed(answer: RemotingCommand) -> None:
            if answer.code == ResponseCode.SUCCESS:
                self.nodes.prime(cluster_nodes(answer.body))

        def failed(failure: Any) -> None:
            log.warn("could not read the cluster from {upstream} at start ({error}); brokers get ports as routes "
                     "name them", upstream=self.config.namesrv_addr, error=failure.getErrorMessage())  # fmt: skip

        return self.namesrvs.request(request).addCallback(primed).addErrback(failed)

    def _listen_node(self, node: Node, port: int) -> IListeningPort:
        """Listen on ``port`` (the node's port or its fast port) for connections relayed to ``node``."""
        return self.reactor.listenTCP(port, _ConnectionFactory(self, self._broker_request, node),
                                      backlog=self.config.server_socket_backlog, interface=self.config.bind_address)  # fmt: skip

    def stop(self) -> defer.Deferred:
        """Stop listening, answer held pulls (PULL_NOT_FOUND), flush the event log, close clients."""
        for loop in self._loops:
            if loop.running:
                loop.stop()
        for port in self.ports:
            port.stopListening()
        self.nodes.close()
        self.holds.shutdown()
        self.pull_log.close()
        for conn in list(self.connections):
            conn.close()
        self.namesrvs.close()
        done: defer.Deferred = defer.Deferred()
        self.reactor.callLater(0.2, done.callback, None)  # let the answers just written leave
        return done

    # --- the name-server port ---------------------------------------------------------------

    def _namesrv_request(self, request: RemotingCommand, conn: Connection) -> Any:
        """Forward to an upstream name server; routes and cluster info come back localized."""
        d = self.namesrvs.request(request)
        if request.is_oneway:
            d.addErrback(lambda f: None)
            return None

        def localized(answer: RemotingCommand) -> RemotingCommand:
            if answer.code == ResponseCode.SUCCESS and answer.body:
                rewrite = {RequestCode.GET_ROUTEINFO_BY_TOPIC: rewrite_route,
                           RequestCode.GET_BROKER_CLUSTER_INFO: rewrite_cluster_info}.get(request.code)  # fmt: skip
                if rewrite is not None:
                    try:
                        answer = dataclasses.replace(answer, body=rewrite(answer.body, self.nodes.localize))
                    except (CodecError, NoFreePort) as exc:
                        return request.response(ResponseCode.SYSTEM_ERROR, f"rmqproxy: cannot serve this route: {exc}")
            return relabel(answer, request.opaque)

        def failed(failure: Any) -> RemotingCommand:
            failure.trap(UpstreamError)
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    f"rmqproxy: no upstream name server answered: {failure.getErrorMessage()}")  # fmt: skip

        return d.addCallbacks(localized, failed)

    # --- broker listeners -------------------------------------------------------------------

    def _broker_request(self, request: RemotingCommand, conn: Connection) -> Any:
        return self.sessions[conn].handle(request)

    def closed(self, conn: Connection) -> None:
        self.connections.discard(conn)
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
        self.pull_log(event)
        if self.config.metrics_enabled:
            self.metrics.on_pull(event, node.label)

    def _sweep(self) -> None:
        for session in list(self.sessions.values()):
            session.pulls.sweep()
