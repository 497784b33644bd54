"""One-way requests the server cannot honour: their answer is never sent, so each refusal is
counted once in ``rmqproxy_rejected_requests_total`` (``oneway_refused``, or the reason a handler
already counted it under) and logged at the rejections' bounded rate, never silently dropped."""

from __future__ import annotations

import pytest
from twisted.internet import defer, task
from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport
from twisted.logger import globalLogPublisher

from codec.codes import FLAG_ONEWAY
from codec.codes import RequestCode as C
from codec.codes import ResponseCode as R
from codec.command import RemotingCommand
from rmqproxy.net.transport import Connection

from .harness import Client
from .harness import send_header
from .test_transactions import COMMIT, end, prepare, producer


@pytest.fixture
def logged():
    events: list[dict] = []
    globalLogPublisher.addObserver(events.append)
    yield events
    globalLogPublisher.removeObserver(events.append)


def rejected(server) -> dict[str, float]:
    """``rmqproxy_rejected_requests_total`` by reason, as /metrics shows it."""
    return {s.labels["reason"]: s.value for family in server.registry.collect()
            if family.name == "rmqproxy_rejected_requests" for s in family.samples if s.name.endswith("_total")}  # fmt: skip


def test_a_refused_oneway_send_is_counted_and_logged_once_and_nothing_is_written_back(servers, tmp_path, logged) -> None:
    server, _reactor = servers(tmp_path, timer_max_delay_sec=60)
    client = Client(server)
    client.send(C.SEND_MESSAGE_V2, send_header("Timed", 1, "TIMER_DELAY_SEC\x0161"), b"later", flag=FLAG_ONEWAY)
    assert client.read() == []
    assert rejected(server) == {"oneway_refused": 1}
    [line] = [e for e in logged if e.get("reason") == "oneway_refused"]
    assert (line["code"], line["answer"], line["conn"]) == ("SEND_MESSAGE_V2", "MESSAGE_ILLEGAL", client.conn)
    assert line["remark"].startswith("timer message illegal, the delay time should not be bigger than the max delay")


def test_a_oneway_send_that_is_stored_is_not_counted(servers, tmp_path) -> None:
    server, _reactor = servers(tmp_path)
    client = Client(server)
    client.send(C.SEND_MESSAGE_V2, send_header("Plain", 1, ""), b"now", flag=FLAG_ONEWAY)
    assert client.read() == []
    assert server.store.max_offset("Plain", 1) == 1
    assert rejected(server) == {}


def test_a_oneway_refusal_already_counted_under_its_own_reason_is_not_counted_again(servers, tmp_path) -> None:
    server, _reactor = servers(tmp_path)
    client = producer(server)
    half = prepare(client, "Orders", "k1")
    end(client, {**half, "queue_offset": 7}, COMMIT)  # one-way, as Java sends it
    client.send(9999, flag=FLAG_ONEWAY)
    client.send(C.PULL_MESSAGE, ext={}, flag=FLAG_ONEWAY)  # no header fields
    assert client.read() == []
    assert rejected(server) == {"transaction_not_applied": 1, "unsupported_code": 1, "bad_request": 1}


def _connection(handler) -> tuple[Connection, StringTransport, list]:
    rejections: list = []
    conn = Connection(handler, task.Clock(), max_frame_bytes=1 << 20,
                      on_reject=lambda reason, fmt, **fields: rejections.append((reason, fields)))  # fmt: skip
    transport = StringTransport(peerAddress=IPv4Address("TCP", "10.0.0.5", 40000))
    conn.makeConnection(transport)
    return conn, transport, rejections


def test_a_oneway_answer_that_lands_later_is_counted_when_it_is_refused() -> None:
    later: list[defer.Deferred] = []

    def handler(request: RemotingCommand, conn: Connection) -> defer.Deferred:
        later.append(defer.Deferred())
        return later[-1].addCallback(lambda code: request.response(code, "flushed" if code == 0 else "flush failed"))

    conn, transport, rejections = _connection(handler)
    conn.dataReceived(b"".join(RemotingCommand(code=310, opaque=o, flag=FLAG_ONEWAY).encode() for o in (1, 2, 3)))
    assert rejections == []
    later[0].callback(R.SUCCESS)
    later[1].callback(R.FLUSH_DISK_TIMEOUT)
    later[2].errback(RuntimeError("store gone"))
    assert [(reason, f["code"], f["answer"], f["remark"]) for reason, f in rejections] == [
        ("oneway_refused", "SEND_MESSAGE_V2", "FLUSH_DISK_TIMEOUT", "flush failed"),
        ("oneway_refused", "SEND_MESSAGE_V2", "SYSTEM_ERROR", "internal error handling request code 310"),
    ]
    assert transport.value() == b"" and conn.in_flight == 0
