"""A proxy on a fake reactor: client connections over ``StringTransport`` on one broker listener,
each with a fake upstream broker end (``FakeBroker``) in place of a dialed connection. Nothing
sleeps; tests move the clock, answer as the broker would, and read what each side received."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport

from codec.command import RemotingCommand
from codec.peer import RemotingPeer
from codec.bodies import HeartbeatData, LockBatchRequestBody, MessageQueue
from codec.codes import PullSysFlag, RequestCode, ResponseCode
from rmqproxy.core.config import Config
from rmqproxy.proxy.nodes import Node
from rmqproxy.proxy.server import ProxyServer, _ConnectionFactory
from rmqproxy.proxy.session import BrokerSession
from rmqproxy.proxy.upstream import PROXY_FIRST_OPAQUE
from rmqproxy.observe.pull_events import PullEvent
from rmqproxy.net.transport import Connection

from ..server.harness import Client, Endpoint, FakeReactor

__all__ = ["FakeBroker", "ProxyClient", "heartbeat", "lock_queues", "make_proxy", "pull_fields"]


def make_proxy(tmp_path: Path, **overrides: Any) -> tuple[ProxyServer, FakeReactor, list[PullEvent]]:
    """A proxy (not listening) in front of a name server that is never dialed; its pull events
    are collected in the returned list."""
    values = {"namesrv_addr": "10.1.0.9:9876", "metrics_port": 0, "pull_log_mode": "off",
              "pull_log_path": str(tmp_path / "pulls"), **overrides}  # fmt: skip
    reactor = FakeReactor()
    proxy = ProxyServer(Config(**values), reactor, wall=reactor.wall)
    events = _Events()
    proxy.runtime.pull_log = events  # type: ignore[assignment]
    return proxy, reactor, events


class _Events(list):
    """Stands in for the pull log: keeps the events in memory."""

    def __call__(self, event: PullEvent) -> None:
        self.append(event)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


class FakeBroker(Endpoint):
    """The upstream broker's end of one session: what the proxy forwarded, and answers to it."""

    def __init__(self, session: BrokerSession, reactor: FakeReactor, *, dialed: bool = True) -> None:
        """``dialed``: as after a dial (the session told its connection is up); False leaves that to the test."""
        self.transport = StringTransport(peerAddress=IPv4Address("TCP", "10.1.0.1", 10911))
        self.conn = Connection(session.from_broker, reactor, max_frame_bytes=16 << 20, batch=session.shared.dialer.batch,
                               first_opaque=PROXY_FIRST_OPAQUE)
        self.conn.makeConnection(self.transport)
        session.link.conn = self.conn  # as if dialed
        if dialed:
            session.upstream_ready(self.conn)
        self.peer = RemotingPeer()  # the broker's own numbering, for requests it starts
        self.received: list[RemotingCommand] = []

    def requests(self, code: int | None = None) -> list[RemotingCommand]:
        self.read()
        return [c for c in self.received if not c.is_response and (code is None or c.code == code)]

    def answer(self, request: RemotingCommand, code: int, ext: dict[str, str] | None = None, body: bytes = b"",
               remark: str | None = None) -> None:  # fmt: skip
        self.conn.dataReceived(request.response(code, remark, ext, body).encode())

    def start(self, command: RemotingCommand) -> int:
        """A request the broker starts (NOTIFY_CONSUMER_IDS_CHANGED...); returns its opaque."""
        opaque, data = self.peer.request(command)
        self.conn.dataReceived(data)
        return opaque


class ProxyClient(Client):
    """A client connected to ``node``'s listener, with the broker behind its session."""

    def __init__(self, proxy: ProxyServer, reactor: FakeReactor, node: Node, client_id: str = "10.0.0.5@1#1") -> None:
        super().__init__(proxy, client_id, factory=_ConnectionFactory(proxy, proxy._broker_request, node))
        self.session = proxy.sessions[self.conn]
        self.broker = FakeBroker(self.session, reactor)

    def close(self) -> None:
        self.conn.connectionLost(None)


def pull_fields(topic: str = "T", queue_id: int = 0, offset: int = 0, suspend_ms: int = 15000, **more: Any) -> dict:
    """A push consumer's pull: suspended, with a commit offset."""
    return {"consumer_group": "G", "topic": topic, "queue_id": queue_id, "queue_offset": offset, "max_msg_nums": 32,
            "sys_flag": PullSysFlag.COMMIT_OFFSET | (PullSysFlag.SUSPEND if suspend_ms else 0), "commit_offset": 0, "suspend_timeout_millis": suspend_ms,
            "sub_version": 1, **more}  # fmt: skip


def lock_queues(client: ProxyClient, group: str = "G", queues: tuple[int, ...] = (0,)) -> RemotingCommand:
    """An orderly consumer's LOCK_BATCH_MQ of topic T's ``queues``, granted; returns it as forwarded."""
    mqs = [MessageQueue("T", "broker-a", q) for q in queues]
    body = LockBatchRequestBody(group, client.client_id, True, mqs).to_json()
    command = RemotingCommand(code=RequestCode.LOCK_BATCH_MQ, ext_fields={"AccessKey": "ak", "Signature": "s"},
                              body=body, version=409)  # fmt: skip
    opaque, data = client.peer.request(command)
    client.conn.dataReceived(data)
    (forwarded,) = client.broker.requests(RequestCode.LOCK_BATCH_MQ)[-1:]
    client.broker.answer(forwarded, ResponseCode.SUCCESS, body=b'{"lockOKMQSet":[]}')
    assert client.answer(opaque).code == ResponseCode.SUCCESS
    return forwarded


def heartbeat(client: ProxyClient) -> None:
    """The client's HEART_BEAT, answered SUCCESS by its broker."""
    opaque = client.send(RequestCode.HEART_BEAT, body=HeartbeatData(client.client_id).to_json())
    (forwarded,) = client.broker.requests(RequestCode.HEART_BEAT)[-1:]
    client.broker.answer(forwarded, ResponseCode.SUCCESS)
    assert client.answer(opaque).code == ResponseCode.SUCCESS
