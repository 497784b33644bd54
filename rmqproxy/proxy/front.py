"""The proxy's name-server port: what clients ask a name server, answered from upstream.

Every request goes to the upstream name servers (``upstream.NameServers``); route and
cluster-info answers come back with each broker's address rewritten to the local port standing
for it (``routes``), which the ``NodeDirectory`` gives out. At start the front reads the cluster
once to give the brokers their ports in a stable order (``prime``), tried again every
``PRIME_RETRY_S`` until it succeeds. One process owns this: the single proxy process, or with
``--workers N`` the supervisor (``workers``), which hands the ports to its workers.
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Callable
from typing import Any

from twisted.internet import defer
from twisted.internet.protocol import Factory
from twisted.logger import Logger

from codec.codes import RequestCode, ResponseCode
from codec.command import RemotingCommand
from codec.errors import CodecError

from codec import implementation as codec_implementation

from ..core.config import SETTINGS, Config
from ..net.tls import TlsSettings
from ..net.transport import Connection
from ..runtime import Runtime
from .nodes import NoFreePort, NodeDirectory
from .routes import cluster_nodes, rewrite_cluster_info, rewrite_route
from .upstream import Dialer, NameServers, UpstreamError, relabel

__all__ = ["PRIME_RETRY_S", "NameServerFront", "check_proxy_config"]

log = Logger()

#: How often the proxy tries again to read the upstream cluster until it has (it is not ready till then).
PRIME_RETRY_S = 1.0

_REWRITES = {RequestCode.GET_ROUTEINFO_BY_TOPIC: rewrite_route, RequestCode.GET_BROKER_CLUSTER_INFO: rewrite_cluster_info}


def check_proxy_config(config: Config) -> None:
    """Refuse a proxy configuration it cannot serve (ValueError, said at start)."""
    if not config.namesrv_addr.strip():
        raise ValueError("proxy mode needs the upstream name servers: --namesrv-addr host:port[;host:port...]")
    if "grpcServerPort" in config.given and config.grpc_server_port:
        raise ValueError("grpcServerPort: proxy mode does not serve gRPC clients yet (rmqproxy serve does); "
                         "remove the key or set it to 0")  # fmt: skip


class NameServerFront:
    """The name-server port's handler and the broker ports it names (see the module doc)."""

    def __init__(self, config: Config, reactor: Any, namesrvs: NameServers, nodes: NodeDirectory) -> None:
        self.config = config
        self.reactor = reactor
        self.namesrvs = namesrvs
        self.nodes = nodes

    def listen(self, runtime: Runtime, factory: Factory, tls: TlsSettings, dialer: Dialer, workers: int = 1,
               sock: socket.socket | None = None) -> None:  # fmt: skip
        """Listen on the name-server port (or accept on ``sock``, bound to it already) and say so,
        naming the keys the proxy ignores."""
        config = self.config
        if sock is not None:
            runtime.adopt(sock, factory)
        else:
            runtime.listen(config.listen_port, factory)
        unused = sorted({s.key for s in SETTINGS if not s.proxy and getattr(config, s.field) != s.default} | set(config.extra))
        if unused:
            log.warn("keys proxy mode does not use, ignored: {keys}", keys=", ".join(unused))
        log.info("rmqproxy proxy listening on {host}:{port} (name server) in front of {upstream}, codec {codec}, "
                 "TLS {mode} to clients, {upstream_tls} upstream, {workers}", host=config.bind_address,
                 port=config.listen_port, upstream=config.namesrv_addr, codec=codec_implementation.describe(),
                 mode=tls.mode, upstream_tls="TLS" if dialer.tls is not None else "plain TCP",
                 workers=f"{workers} worker processes" if workers > 1 else "one process")  # fmt: skip

    def prime(self, ready: Callable[[], None], waiting: Callable[[str], None], stopped: Callable[[], bool],
              attempt: int = 1) -> defer.Deferred:  # fmt: skip
        """Read the cluster and give its brokers their ports, then call ``ready``. Until that
        succeeds, brokers get ports as routes name them, ``waiting(reason)`` says why, and the
        read is tried again every ``PRIME_RETRY_S`` (unless ``stopped()``)."""

        def primed(answer: RemotingCommand) -> None:
            if answer.code != ResponseCode.SUCCESS:
                raise UpstreamError(f"the name server answered {answer.code}: {answer.remark}")
            self.nodes.prime(cluster_nodes(answer.body))
            ready()

        def failed(failure: Any) -> None:
            reason = f"cannot read the cluster from {self.config.namesrv_addr}: {failure.getErrorMessage()}"
            waiting(reason)
            if attempt == 1:
                log.warn("{reason}; brokers get ports as routes name them, and the proxy is not ready (/ready) "
                         "until the cluster is read (tried again every {s:g} s)", reason=reason, s=PRIME_RETRY_S)  # fmt: skip
            if not stopped():
                self.reactor.callLater(PRIME_RETRY_S, self.prime, ready, waiting, stopped, attempt + 1)

        request = RemotingCommand(RequestCode.GET_BROKER_CLUSTER_INFO)
        return self.namesrvs.request(request).addCallback(primed).addErrback(failed)

    def request(self, request: RemotingCommand, conn: Connection) -> Any:
        """Forward to an upstream name server; routes and cluster info come back localized."""
        d = self.namesrvs.request(request)
        if request.is_oneway:
            d.addErrback(lambda f: None)
            return None

        def localized(answer: RemotingCommand) -> RemotingCommand:
            if answer.code == ResponseCode.SUCCESS and answer.body:
                rewrite = _REWRITES.get(request.code)
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

    def close(self) -> None:
        self.namesrvs.close()
