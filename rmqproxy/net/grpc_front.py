"""The gRPC listener: a ``grpc.aio`` server on a thread of its own, and the bridge to the reactor.

grpc.aio runs its handlers as coroutines on an asyncio loop; Twisted's reactor runs everything
else. The rule both sides keep: only the reactor thread touches the tables and the store, and only
the gRPC thread touches gRPC objects. A handler decodes and checks its request on the gRPC thread,
hands plain values to the reactor with ``GrpcFront.call`` (``reactor.callFromThread``; a Deferred
result is awaited), and encodes the answer back on its own thread; the reactor pushes to a stream
(Telemetry) with ``GrpcFront.post`` (``loop.call_soon_threadsafe``). Waiting costs neither side
a thread: a held receive is a Deferred on the reactor and an awaited future on the loop.

TLS follows ``tls.server.mode`` as on the remoting ports. ``disabled`` and ``enforcing`` put the
gRPC server on the public port with one credential. ``permissive`` serves both on one port, which
gRPC servers cannot do themselves: the public port belongs to a small splicer on the gRPC loop
that reads a connection's first byte (0x16 opens a TLS handshake) and relays the connection to
one of two loopback listeners of the same gRPC server, one with TLS (ALPN ``h2``, which the Java
client needs) and one plain. ``peer_of`` maps a relayed connection back to the client's address.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable, Sequence
from typing import Any

from twisted.internet import defer
from twisted.logger import Logger

from .tls import TlsSettings

__all__ = ["GrpcFront", "GrpcStartError"]

log = Logger()

_HANDSHAKE = 0x16
#: How long a new connection may take to send its first byte before the splicer drops it.
FIRST_BYTE_S = 10.0
#: Relay buffer per read.
_CHUNK = 256 << 10
START_TIMEOUT_S = 30.0


class GrpcStartError(RuntimeError):
    """The gRPC listener could not start (its port taken, its TLS not loading)."""


class GrpcFront:
    """One gRPC server, its thread and loop (see the module docstring)."""

    def __init__(self, reactor: Any, *, host: str, port: int, tls: TlsSettings, max_message_bytes: int,
                 add_services: Callable[[Any, GrpcFront], None], options: Sequence[tuple[str, Any]] = ()) -> None:  # fmt: skip
        self.reactor = reactor
        self.host = host
        self.port = port
        self.tls = tls
        self.max_message_bytes = max_message_bytes
        self.add_services = add_services
        self.options = list(options)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.bound_port = 0
        self._thread: threading.Thread | None = None
        self._server: Any = None
        self._splicer: asyncio.AbstractServer | None = None
        self._relayed: dict[int, str] = {}  # loopback port of a relayed connection -> the client's peer text
        self._stopped = threading.Event()

    # --- the reactor's side -----------------------------------------------------------------

    def start(self) -> int:
        """Start the thread and listen; returns the bound port once it listens (raises
        ``GrpcStartError`` if it cannot)."""
        started: dict[str, Any] = {}
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self.loop = loop
            try:
                started["port"] = loop.run_until_complete(self._open())
            except BaseException as exc:  # reported to the starter
                started["error"] = exc
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.close()
                self._stopped.set()

        self._thread = threading.Thread(target=run, name="grpc", daemon=True)
        self._thread.start()
        if not ready.wait(START_TIMEOUT_S):
            raise GrpcStartError(f"the gRPC listener did not start within {START_TIMEOUT_S:.0f} s")
        if "error" in started:
            raise GrpcStartError(f"gRPC port {self.port}: {started['error']}")
        self.bound_port = started["port"]
        return self.bound_port

    def stop(self, grace_s: float = 1.0) -> defer.Deferred:
        """Stop listening, let running calls end for ``grace_s`` (held receives were answered
        before this), end the loop; the Deferred fires on the reactor once the thread is done."""
        done: defer.Deferred = defer.Deferred()
        loop = self.loop
        if loop is None or self._stopped.is_set():
            done.callback(None)
            return done

        async def close() -> None:
            if self._splicer is not None:
                self._splicer.close()
            if self._server is not None:
                await self._server.stop(grace_s)
            loop.stop()

        def finished() -> None:
            self._stopped.wait(grace_s + 5)
            self.reactor.callFromThread(done.callback, None)

        asyncio.run_coroutine_threadsafe(close(), loop)
        threading.Thread(target=finished, name="grpc-stop", daemon=True).start()
        return done

    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the gRPC loop (from the reactor thread); dropped once stopped."""
        loop = self.loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(fn, *args)
            except RuntimeError:  # closed in between
                pass

    # --- the gRPC thread's side -------------------------------------------------------------

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` on the reactor thread and return its result (a Deferred's result once
        it fires); its exception is raised here. Cancelling the await does not stop ``fn``."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()

        def settle(result: Any, error: BaseException | None) -> None:
            if not future.done():
                if error is not None:
                    future.set_exception(error)
                else:
                    future.set_result(result)

        def deliver(result: Any, error: BaseException | None) -> None:
            try:
                loop.call_soon_threadsafe(settle, result, error)
            except RuntimeError:  # the loop closed meanwhile: nobody waits
                pass

        def run() -> None:
            try:
                result = fn(*args)
            except Exception as exc:
                deliver(None, exc)
                return
            if isinstance(result, defer.Deferred):
                result.addCallbacks(lambda value: deliver(value, None), lambda failure: deliver(None, failure.value))
            else:
                deliver(result, None)

        self.reactor.callFromThread(run)
        return await future

    def peer_of(self, peer: str) -> str:
        """The client's address (``host:port``) for a gRPC ``context.peer()``: through the splicer
        a call's peer is the relay's loopback port, mapped back here."""
        kind, _, rest = peer.partition(":")
        if kind not in ("ipv4", "ipv6"):
            return peer
        host, _, port = rest.rpartition(":")
        relayed = self._relayed.get(int(port)) if port.isdigit() and host in ("127.0.0.1", "[::1]") else None
        return relayed or f"{host.strip('[]')}:{port}"

    async def _open(self) -> int:
        import grpc

        options = [("grpc.so_reuseport", 0), ("grpc.max_receive_message_length", self.max_message_bytes),
                   ("grpc.max_send_message_length", self.max_message_bytes), *self.options]  # fmt: skip
        server = grpc.aio.server(options=options)
        self.add_services(server, self)
        mode = self.tls.mode
        if mode == "permissive":
            plain = server.add_insecure_port("127.0.0.1:0")
            secure = server.add_secure_port("127.0.0.1:0", self._credentials())
            if not plain or not secure:
                raise GrpcStartError("could not open the loopback listeners")
            await server.start()
            self._server = server
            splicer = await asyncio.start_server(lambda r, w: self._relay(r, w, plain, secure), host=self.host,
                                                 port=self.port, reuse_address=True)  # fmt: skip
            self._splicer = splicer
            return splicer.sockets[0].getsockname()[1]
        address = f"{self.host}:{self.port}"
        bound = server.add_secure_port(address, self._credentials()) if mode == "enforcing" else server.add_insecure_port(address)
        if not bound:
            raise GrpcStartError(f"could not listen on {address}")
        await server.start()
        self._server = server
        return bound

    def _credentials(self) -> Any:
        import grpc

        key, chain = self.tls.pem()
        trust = self.tls.trust_pem()
        auth = self.tls.need_client_auth.lower()
        return grpc.ssl_server_credentials([(key, chain)], root_certificates=trust, require_client_auth=auth == "require")

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, plain: int, secure: int) -> None:
        """One client connection of the permissive port: first byte, then both ways to a listener."""
        peer = writer.get_extra_info("peername")
        try:
            first = await asyncio.wait_for(reader.read(1), FIRST_BYTE_S)
        except (asyncio.TimeoutError, OSError):
            writer.close()
            return
        if not first:
            writer.close()
            return
        port = secure if first[0] == _HANDSHAKE else plain
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError as exc:
            log.warn("gRPC relay to the loopback listener failed: {error}", error=exc)
            writer.close()
            return
        local = up_writer.get_extra_info("sockname")[1]
        self._relayed[local] = f"{peer[0]}:{peer[1]}" if peer else "unknown"
        for w in (writer, up_writer):
            sock = w.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        up_writer.write(first)
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            self._relayed.pop(local, None)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy ``reader`` to ``writer`` until either side ends, then close the writer."""
    try:
        while True:
            data = await reader.read(_CHUNK)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (OSError, asyncio.CancelledError):
        pass
    finally:
        try:
            writer.close()
        except OSError:
            pass
