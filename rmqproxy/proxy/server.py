"""Proxy mode's composition root: ``rmqproxy proxy`` in front of an Apache RocketMQ cluster.

The name-server port forwards every request to the upstream name servers and rewrites the broker
addresses of route and cluster-info answers to the proxy's own listeners (``routes``, ``nodes``).
Each listener stands for one upstream broker node; each client connection on it gets a
``BrokerSession`` with its own upstream connection. There is no store: what the proxy keeps is
per connection (sessions, pull slots) or bounded (held pulls, kept answers, lock records).
Every listener serves TLS per ``tls.server.mode`` as ``serve``'s do (``net.tls``), and with
``tls.enable`` every upstream dial is TLS (``net.tls_client``, through the ``Dialer``).
docs/architecture.md, "Proxy mode", says why it is built this way.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from twisted.internet import defer
from twisted.internet.interfaces import IListeningPort
from twisted.internet.protocol import Factory
from twisted.logger import Logger

from codec import implementation as codec_implementation
from codec.codes import RequestCode, ResponseCode
from codec.command import RemotingCommand
from codec.errors import CodecError

from ..core.clocks import Wall
from ..core.config import SETTINGS, Config
from ..observe.pull_events import PullEvent
from ..runtime import Runtime
from ..net.replies import WriteBatch
from ..net.tls import TlsSettings, sniffing_factory
from ..net.tls_client import UpstreamTls
from ..net.transport import Connection
from .handoff import LockHandoff
from .nodes import NoFreePort, Node, NodeDirectory, parse_port_range
from .routes import cluster_nodes, rewrite_cluster_info, rewrite_route
from .session import BrokerSession
from .shared import Relaying, StashBudget
from .upstream import Dialer, NameServers, UpstreamError, relabel

log = Logger()

#: How often the proxy tries again to read the upstream cluster until it has (it is not ready till then).
PRIME_RETRY_S = 1.0
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
    """``rmqproxy proxy``: the name-server port and a listener per upstream broker node."""

    def __init__(self, config: Config, reactor: Any, wall: Wall = time.time) -> None:
        if not config.namesrv_addr.strip():
            raise ValueError("proxy mode needs the upstream name servers: --namesrv-addr host:port[;host:port...]")
        if "grpcServerPort" in config.given and config.grpc_server_port:
            raise ValueError("grpcServerPort: proxy mode does not serve gRPC clients yet (rmqproxy serve does); "
                             "remove the key or set it to 0")  # fmt: skip
        self.config = config
        self.reactor = reactor
        self.timeout_s = config.proxy_request_timeout_ms / 1000
        self.runtime = runtime = Runtime(config, reactor, node_id="rmqproxy-proxy", broker_label=True, wall=wall)
        self.metrics, self.holds = runtime.metrics, runtime.holds
        runtime.watch()
        self.tls = TlsSettings.of(config)  # the client side: its ports, as ``serve`` serves TLS
        self.batch = WriteBatch()
        self.dialer = Dialer(reactor, max_frame_bytes=config.max_frame_size, timeout_s=self.timeout_s, batch=self.batch,
                             deadlines=runtime.deadlines, frames=runtime.unfinished_frames,
                             tls=UpstreamTls.of(config))  # fmt: skip
        self.namesrvs = NameServers(self.dialer, config.namesrv_addr)
        self.nodes = NodeDirectory(parse_port_range(config.proxy_broker_ports, config.listen_port),
                                   config.advertised_host, self._listen_node, fast=config.fast_port_enable)  # fmt: skip
        self.handoff = LockHandoff(reactor, immediate=config.lock_release_on_disconnect == "immediate",
                                   timeout_s=self.timeout_s)  # fmt: skip
        self.stash = StashBudget()  # late upstream answers kept for their clients' next pulls
        self.relaying = Relaying(clock=reactor, wall=wall, dialer=self.dialer, timeout_s=self.timeout_s,
                                 holds=self.holds, max_suspend_s=config.max_pull_suspend_ms / 1000, stash=self.stash,
                                 handoff=self.handoff, answered=self.answered, pulled=self.pulled,
                                 rejected=runtime.rejections)  # fmt: skip
        self.sessions: dict[Connection, BrokerSession] = {}

    # --- start and stop ---------------------------------------------------------------------

    def start(self) -> Any:
        """Listen on the name-server port (and /metrics), then give the cluster's brokers their
        ports in sorted order; the Deferred fires when that is done (or failed: ports are then
        given as routes name the brokers)."""
        config = self.config
        self.runtime.listen(config.listen_port, self._factory(self._namesrv_request, None))
        self.runtime.serve_metrics()
        self.runtime.every([(0.5, self.runtime.pull_log.flush), (10.0, self._sweep)])
        unused = sorted({s.key for s in SETTINGS if not s.proxy and getattr(config, s.field) != s.default} | set(config.extra))
        if unused:
            log.warn("keys proxy mode does not use, ignored: {keys}", keys=", ".join(unused))
        log.info("rmqproxy proxy listening on {host}:{port} (name server) in front of {upstream}, codec {codec}, "
                 "TLS {mode} to clients, {upstream_tls} upstream", host=config.bind_address, port=config.listen_port,
                 upstream=config.namesrv_addr, codec=codec_implementation.describe(), mode=self.tls.mode,
                 upstream_tls="TLS" if self.dialer.tls is not None else "plain TCP")  # fmt: skip
        return self._prime()

    def _prime(self, attempt: int = 1) -> defer.Deferred:
        """Read the cluster from the upstream name servers and give its brokers their ports; the
        proxy is ready (``/ready``) once that is done. Until it is, brokers get ports as routes
        name them, and the read is tried again every ``PRIME_RETRY_S``."""
        request = RemotingCommand(RequestCode.GET_BROKER_CLUSTER_INFO)

        def primed(answer: RemotingCommand) -> None:
            if answer.code != ResponseCode.SUCCESS:
                raise UpstreamError(f"the name server answered {answer.code}: {answer.remark}")
            self.nodes.prime(cluster_nodes(answer.body))
            self.runtime.readiness.set_ready()

        def failed(failure: Any) -> None:
            reason = f"cannot read the cluster from {self.config.namesrv_addr}: {failure.getErrorMessage()}"
            self.runtime.readiness.waiting(reason)
            if attempt == 1:
                log.warn("{reason}; brokers get ports as routes name them, and the proxy is not ready (/ready) "
                         "until the cluster is read (tried again every {s:g} s)", reason=reason, s=PRIME_RETRY_S)  # fmt: skip
            if not self.runtime.stopped:
                self.reactor.callLater(PRIME_RETRY_S, self._prime, attempt + 1)

        return self.namesrvs.request(request).addCallback(primed).addErrback(failed)

    def _listen_node(self, node: Node, port: int) -> IListeningPort:
        """Listen on ``port`` (the node's port or its fast port) for connections relayed to ``node``."""
        return self.runtime.open_port(port, self._factory(self._broker_request, node))

    def _factory(self, handler: Any, node: Node | None) -> Factory:
        """Client connections served by ``handler`` (relayed to ``node``), TLS or plain per ``tls.server.mode``."""
        return sniffing_factory(_ConnectionFactory(self, handler, node), self.tls, self.reactor)

    def stop(self) -> defer.Deferred:
        """Stop accepting on every port, answer held pulls (PULL_NOT_FOUND), let the answers in
        flight reach their clients, close the clients and the name-server link, and wait for the
        departed clients' queue locks to be released upstream (``Runtime.stop``)."""
        return self.runtime.stop([self.namesrvs.close], first=[self.nodes.close], settle=self.handoff.settled)

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
