"""A whole server on a fake reactor: real store (temp dir), ``task.Clock`` time, clients over
``StringTransport``. Nothing sleeps; tests move the clock and read what each client received."""

from __future__ import annotations

import dataclasses
import itertools
import queue
from pathlib import Path
from typing import Any

from twisted.internet import task
from twisted.internet.address import IPv4Address
from twisted.internet.error import CannotListenError
from twisted.internet.testing import StringTransport

from codec.bodies import ConsumerData, HeartbeatData, ProducerData, build_subscription
from codec.codes import RequestCode
from codec.command import RemotingCommand
from codec.headers import REQUEST_HEADERS, SendMessageRequestHeader
from codec.peer import RemotingPeer
from rmqproxy.core.config import Config
from rmqproxy.broker.server import Server


class SteppedWall:
    """A fake wall clock: the reactor's time plus the steps a test gave it (NTP, ``date -s``)."""

    def __init__(self, clock: task.Clock) -> None:
        self.clock = clock
        self.offset = 0.0

    def __call__(self) -> float:
        return self.clock.seconds() + self.offset

    def step(self, seconds: float) -> None:
        """Step the wall clock by ``seconds`` (either way); the reactor's clock does not move."""
        self.offset += seconds


class FakeReactor(task.Clock):
    """``task.Clock`` (the server's monotonic clock) plus what the server asks of a reactor
    besides time, and a wall clock a test can step (``wall``: the server's absolute times)."""

    def __init__(self) -> None:
        super().__init__()
        self.advance(1_700_000_000.0)  # so the wall clock, which starts equal, reads like an epoch time
        self.wall = SteppedWall(self)
        self.thread_calls: queue.SimpleQueue = queue.SimpleQueue()
        self.listening: list[tuple[str, int]] = []  # (interface, port)
        self.factories: dict[int, Any] = {}  # port -> the factory listening there
        self.taken: set[int] = set()  # ports whose listenTCP fails as if another process had them
        self.backlogs: list[int] = []  # the listen backlog of each port

    def callFromThread(self, fn, *args, **kwargs) -> None:
        self.thread_calls.put((fn, args, kwargs))

    def run_thread_calls(self, timeout: float = 0.0) -> int:
        ran = 0
        try:
            item = self.thread_calls.get(timeout=timeout) if timeout else self.thread_calls.get_nowait()
            while True:
                fn, args, kwargs = item
                fn(*args, **kwargs)
                ran += 1
                item = self.thread_calls.get_nowait()
        except queue.Empty:
            return ran

    def listenTCP(self, port: int, factory: Any, backlog: int = 50, interface: str = "") -> Any:
        if port in self.taken:
            raise CannotListenError(interface, port, OSError(98, "Address already in use"))
        self.listening.append((interface, port))
        self.factories[port] = factory
        self.backlogs.append(backlog)
        factory.doStart()
        return _Port(interface, port)


@dataclasses.dataclass
class _Port:
    interface: str
    port: int

    def getHost(self) -> Any:
        return IPv4Address("TCP", self.interface, self.port)

    def stopListening(self) -> None:
        pass


class Endpoint:
    """The far end of a connection on a ``StringTransport``: what was written to it, decoded."""

    transport: StringTransport
    peer: RemotingPeer
    received: list[RemotingCommand]

    def read(self) -> list[RemotingCommand]:
        """Everything written since the last read."""
        data = self.transport.value()
        self.transport.clear()
        commands = [incoming.command for incoming in self.peer.receive(data)]
        self.received += commands
        return commands


class Client(Endpoint):
    """One client connection to the server: write requests, read what the server wrote."""

    _ports = itertools.count(40000)

    def __init__(self, server: Any, client_id: str = "10.0.0.5@1#1", version: int = 409, *, factory: Any = None) -> None:
        """A connection built by ``factory`` (default: the server's own listener factory)."""
        from rmqproxy.broker.server import _Factory

        self.server = server
        self.client_id = client_id
        self.version = version
        self.conn = (factory or _Factory(server)).buildProtocol(None)
        self.transport = StringTransport(peerAddress=IPv4Address("TCP", "10.0.0.5", next(self._ports)))
        self.conn.makeConnection(self.transport)
        self.peer = RemotingPeer()
        self.received: list[RemotingCommand] = []

    def send(self, code: int, header: Any = None, body: bytes = b"", *, flag: int = 0, ext=None, **fields) -> int:
        """Write a request; returns its opaque. ``fields`` build the code's typed header."""
        if header is None and fields:
            header = REQUEST_HEADERS[code].cls(**fields)
        if header is not None:
            ext = REQUEST_HEADERS[code].encode(header)
        command = RemotingCommand(code=code, flag=flag, ext_fields=ext, body=body, version=self.version)
        opaque, data = self.peer.request(command)
        self.conn.dataReceived(data)
        return opaque

    def answer(self, opaque: int, *, required: bool = False) -> RemotingCommand | None:
        """The response to request ``opaque``, if the server has written it (``required``: asserts it has)."""
        self.read()
        for command in self.received:
            if command.is_response and command.opaque == opaque:
                return command
        assert not required, f"no answer to request {opaque}"
        return None

    def send_message(self, topic: str, body: bytes = b"x", queue_id: int = 0, tags: str | None = None,
                     **extra: Any) -> RemotingCommand:  # fmt: skip
        """A producer's SEND_MESSAGE_V2 of ``body`` to ``topic`` (WAIT=true, TAGS when given), answered."""
        props = f"TAGS\x01{tags}\x02WAIT\x01true" if tags else "WAIT\x01true"
        return self.call(RequestCode.SEND_MESSAGE_V2, send_header(topic, queue_id, props, **extra), body)

    def pull_message(self, topic: str, offset: int, queue_id: int = 0, group: str = "cg", sys_flag: int = 0,
                     **extra: Any) -> int:  # fmt: skip
        """A PULL_MESSAGE of up to 32 messages (``sys_flag``: ``PullSysFlag`` bits, e.g. SUSPEND to be
        held 15 s); returns its opaque, for ``answer``."""
        fields = dict(consumer_group=group, topic=topic, queue_id=queue_id, queue_offset=offset, max_msg_nums=32,
                      sys_flag=sys_flag, commit_offset=0, suspend_timeout_millis=15000, sub_version=0)  # fmt: skip
        fields.update(extra)
        return self.send(RequestCode.PULL_MESSAGE, **fields)

    def call(self, code: int, header: Any = None, body: bytes = b"", **fields) -> RemotingCommand:
        opaque = self.send(code, header, body, **fields)
        response = self.answer(opaque)
        assert response is not None, f"no answer to {code}"
        return response

    def heartbeat(self, group: str | None = None, topics: dict[str, str] | None = None, **consumer: str) -> None:
        consumers = []
        if group is not None:
            subs = [build_subscription(t, expr, 1) for t, expr in (topics or {}).items()]
            consumers.append(ConsumerData(group, consumer.get("consume_type", "CONSUME_PASSIVELY"), "CLUSTERING",
                                          "CONSUME_FROM_FIRST_OFFSET", subs, False))  # fmt: skip
        data = HeartbeatData(self.client_id, [ProducerData("CLIENT_INNER_PRODUCER")], consumers)
        assert self.call(RequestCode.HEART_BEAT, body=data.to_json()).code == 0


def send_header(topic: str, queue_id: int = 0, props: str = "", **extra: Any) -> SendMessageRequestHeader:
    """A Java producer's SEND_MESSAGE_V2 header for ``topic`` (``props``: its properties string)."""
    return SendMessageRequestHeader(
        producer_group="pg", topic=topic, default_topic="TBW102", default_topic_queue_nums=4, queue_id=queue_id,
        sys_flag=0, born_timestamp=1, flag=0, properties=props, **extra,
    )  # fmt: skip


def make_server(tmp_path: Path, *, started_after_s: float = 0.0, **overrides: Any) -> tuple[Server, FakeReactor]:
    """A started server on ``tmp_path``; its clock starts ``started_after_s`` past the usual start
    (a restart that comes later than the first start). No gRPC port unless ``grpc_server_port`` is given."""
    values = {"store_path": str(tmp_path / "store"), "listen_port": 9876, "metrics_port": 0, "grpc_server_port": 0,
              **overrides}  # fmt: skip
    reactor = FakeReactor()
    reactor.advance(started_after_s)
    server = Server(Config(**values), reactor, wall=reactor.wall)
    server.start()
    return server, reactor
