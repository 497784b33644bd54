"""The proxy's side as a client: connections to upstream brokers and name servers.

An upstream connection is the same ``transport.Connection`` the server uses for its clients
(``codec.peer.RemotingPeer`` underneath): it numbers our requests, matches answers by opaque,
expires the unanswered ones and hands requests the broker starts to a handler. Only the dialing
is here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet import defer
from twisted.internet.endpoints import TCP4ClientEndpoint
from twisted.internet.protocol import Factory
from twisted.logger import Logger
from twisted.python.failure import Failure

from codec.command import RemotingCommand

from ..core.alarm import Deadlines
from ..net.outbound import RequestTimeout
from ..net.replies import WriteBatch
from ..net.tls_client import UpstreamTls
from ..net.transport import Connection, Handler
from ..net.unfinished import UnfinishedFrames

log = Logger()


#: Where the proxy numbers its own requests upstream: far from where clients' counters run (Java's
#: starts at 0 per JVM and reaches this only after 3 * 2**30 requests), since a client's requests
#: go up the same connection under their own opaques (``session``).
PROXY_FIRST_OPAQUE = -(1 << 30)


class UpstreamError(Exception):
    """An upstream peer could not be reached, closed, or did not answer in time."""


class Dialer:
    """How the proxy opens upstream connections: their frame cap, connect timeout, TLS
    (``tls_client.UpstreamTls``), and the write batch, deadlines and unfinished-frame bounds they
    share with the client connections (``replies.WriteBatch``, ``alarm.Deadlines``,
    ``unfinished.UnfinishedFrames``)."""

    def __init__(self, reactor: Any, *, max_frame_bytes: int, timeout_s: float, batch: WriteBatch | None = None,
                 deadlines: Deadlines | None = None, frames: UnfinishedFrames | None = None,
                 tls: UpstreamTls | None = None) -> None:  # fmt: skip
        self.reactor = reactor
        self.tls = tls if tls is not None and tls.enable else None  # TLS around every dial (tls.enable), else plain
        self.max_frame_bytes = max_frame_bytes
        self.timeout_s = timeout_s
        self.batch = batch
        self.deadlines = deadlines
        self.frames = frames

    def dial(self, address: str, handler: Handler, on_close: Callable[[Connection], None] | None = None) -> defer.Deferred:
        """A Deferred ``Connection`` to ``address`` ("host:port"); fails with UpstreamError."""
        host, _, port = address.rpartition(":")
        try:
            endpoint = TCP4ClientEndpoint(self.reactor, host, int(port), timeout=self.timeout_s)
        except ValueError:
            return defer.fail(UpstreamError(f"bad upstream address {address!r}"))
        conn = Connection(handler, self.reactor, max_frame_bytes=self.max_frame_bytes, on_close=on_close,
                          batch=self.batch, deadlines=self.deadlines, frames=self.frames,
                          first_opaque=PROXY_FIRST_OPAQUE)  # fmt: skip

        def failed(failure: Any) -> None:
            raise UpstreamError(f"cannot connect to {address}: {failure.getErrorMessage()}")

        if self.tls is not None:
            return self.tls.connect(endpoint, _Quiet(conn), self.reactor, self.timeout_s).addErrback(failed)
        return endpoint.connect(_Quiet(conn)).addErrback(failed)


class _Quiet(Factory):
    """Builds the one connection of a dial, without a log line per connection."""

    noisy = False

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def buildProtocol(self, addr: Any) -> Connection:
        return self.conn


def relabel(command: RemotingCommand, opaque: int) -> RemotingCommand:
    """``command`` under another opaque (what a relayed answer changes, and nothing else)."""
    return command.with_opaque(opaque)


def ask(conn: Connection, command: RemotingCommand, timeout_s: float) -> defer.Deferred:
    """``conn.request`` whose failures are UpstreamError."""

    def failed(failure: Any) -> None:
        failure.trap(RequestTimeout)
        raise UpstreamError(failure.getErrorMessage())

    return conn.request(command, timeout_s).addErrback(failed)


class LazyConnection:
    """One upstream connection, dialed on first use and again after it closes; callers that ask
    while it is being dialed wait for the same attempt."""

    def __init__(
        self, dialer: Dialer, address: Callable[[], str], handler: Handler, *,
        on_connect: Callable[[Connection], Any] | None = None, on_close: Callable[[Connection], None] | None = None,
    ) -> None:  # fmt: skip
        self.dialer = dialer
        self.address = address
        self.handler = handler
        self.on_connect = on_connect  # may return a Deferred: callers wait for it (a replayed heartbeat)
        self.on_close = on_close
        self.conn: Connection | None = None
        self._waiters: list[defer.Deferred] = []
        self.closed = False

    def get(self) -> defer.Deferred:
        """A Deferred of the open connection; fails with UpstreamError."""
        if self.conn is not None and self.conn.connected:
            return defer.succeed(self.conn)
        if self.closed:
            return defer.fail(UpstreamError("the proxy session is closed"))
        waiting: defer.Deferred = defer.Deferred()
        self._waiters.append(waiting)
        if len(self._waiters) == 1:
            self.dialer.dial(self.address(), self.handler, self.on_close).addCallbacks(self._connected, self._release)
        return waiting

    def _connected(self, conn: Connection) -> Any:
        if self.closed:
            conn.close()
            return self._release(Failure(UpstreamError("the proxy session is closed")))
        self.conn = conn
        ready = self.on_connect(conn) if self.on_connect is not None else None
        if isinstance(ready, defer.Deferred):
            return ready.addBoth(lambda _: self._release(conn))
        return self._release(conn)

    def _release(self, result: Any) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if isinstance(result, Failure):
                waiter.errback(result)
            else:
                waiter.callback(result)

    def close(self) -> None:
        """Close the connection and dial no more."""
        self.closed = True
        if self.conn is not None:
            self.conn.close()


def _refuse(_command: RemotingCommand, _conn: Connection) -> None:
    """Name servers start no requests: anything they send is ignored."""


class NameServers:
    """The upstream name servers (``namesrvAddr``, Java's ``a;b`` syntax): one connection at a
    time, to the first that answers, and the next one when it fails.

    A failure moves the proxy on once: requests that fail together (all those in flight when a
    name server dies, or waiting on a refused dial), or later on a name server already left
    behind (in flight on one that stopped answering, whose socket closes after the next one is
    connected), are asked again of the current one without moving past it or closing it."""

    def __init__(self, dialer: Dialer, addresses: str) -> None:
        self.addresses = [a.strip() for a in addresses.split(";") if a.strip()]
        if not self.addresses:
            raise ValueError("namesrvAddr names no name server (host:port[;host:port...])")
        self.timeout_s = dialer.timeout_s
        self._index = 0  # of the current name server; only ever increases
        self._link = LazyConnection(dialer, self._current, _refuse)

    def _current(self) -> str:
        return self.addresses[self._index % len(self.addresses)]

    def request(self, command: RemotingCommand) -> defer.Deferred:
        """``command``'s answer from a name server, trying each once; fails with UpstreamError."""
        return self._attempt(command, len(self.addresses))

    def _attempt(self, command: RemotingCommand, tries: int) -> defer.Deferred:
        index = self._index
        d = self._link.get().addCallback(ask, command, self.timeout_s)

        def failed(failure: Any) -> Any:
            failure.trap(UpstreamError)
            if index == self._index:  # the first to see this name server fail moves on
                self._index += 1
                if self._link.conn is not None:
                    self._link.conn.close()
            if tries <= 1:
                return failure
            log.warn("name server: {error}; trying the next", error=failure.getErrorMessage())
            return self._attempt(command, tries - 1)

        return d.addErrback(failed)

    def close(self) -> None:
        self._link.close()
