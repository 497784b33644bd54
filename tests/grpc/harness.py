"""A ``serve`` server with its gRPC listener on a fake reactor (``tests/server/harness.py``), and a
real gRPC client for it. The gRPC thread is real; what it hands the reactor waits in the fake
reactor's queue until ``GrpcClient.call`` runs it, so tests move the clock themselves and nothing
sleeps for a hold to end."""

from __future__ import annotations

import concurrent.futures
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from rmqproxy.grpc_wire import rpc
from tests.server.harness import FakeReactor, make_server

CLIENT_ID = "tester@1@1@abc"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class GrpcClient:
    """A plain-text channel to the server's gRPC port and the calls tests make on it."""

    def __init__(self, server: Any, reactor: FakeReactor, *, client_id: str = CLIENT_ID) -> None:
        self.server = server
        self.reactor = reactor
        self.client_id = client_id
        self.channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_front.bound_port}")
        self.stub = rpc.MessagingServiceStub(self.channel)
        self.pool = concurrent.futures.ThreadPoolExecutor(4)

    @property
    def metadata(self) -> list[tuple[str, str]]:
        return [("x-mq-client-id", self.client_id), ("x-mq-language", "PYTHON"), ("x-mq-client-version", "5.0.8")]

    def start(self, fn: Callable[[], Any]) -> concurrent.futures.Future:
        """Run a blocking call on a client thread."""
        return self.pool.submit(fn)

    def pump(self, future: concurrent.futures.Future, timeout: float = 10.0) -> Any:
        """Run the reactor's queued work until ``future`` is done; its result."""
        import time

        deadline = time.monotonic() + timeout
        while not future.done():
            if time.monotonic() > deadline:
                raise TimeoutError("the call did not finish")
            self.reactor.run_thread_calls(timeout=0.01)
        return future.result()

    def call(self, method: str, request: Any, timeout: float = 10.0) -> Any:
        """One unary RPC, the reactor pumped until it is answered."""
        fn = getattr(self.stub, method)
        return self.pump(self.start(lambda: fn(request, metadata=self.metadata, timeout=timeout)), timeout + 5)

    def receive_start(self, request: Any, timeout: float = 30.0) -> concurrent.futures.Future:
        """A ReceiveMessage on a client thread: the future's result is the list of responses."""
        return self.start(lambda: list(self.stub.ReceiveMessage(request, metadata=self.metadata, timeout=timeout)))

    def close(self) -> None:
        self.channel.close()
        self.pool.shutdown(wait=False, cancel_futures=True)


def make_grpc_server(tmp_path: Path, **overrides: Any) -> tuple[Any, FakeReactor, GrpcClient]:
    """A started server with a gRPC port (plain text unless ``tls_mode`` says otherwise) and a client."""
    overrides.setdefault("tls_mode", "disabled")
    server, reactor = make_server(tmp_path, grpc_server_port=free_port(), **overrides)
    return server, reactor, GrpcClient(server, reactor)
