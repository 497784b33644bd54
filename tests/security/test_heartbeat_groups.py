"""A heartbeat naming thousands of groups cannot freeze the server (issue 24): their retry topics
are persisted by a writer thread, never on the reactor, and the groups are registered a slice per
reactor turn, so other clients are served in between. It once held the reactor for 28.4 s."""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from codec.bodies import ConsumerData, HeartbeatData, ProducerData, build_subscription
from codec.codes import RequestCode as C
from codec.codes import ResponseCode as R
from codec.command import RemotingCommand
from codec.frame import FrameDecoder
from rmqproxy.core import files

from ..interop.server import RunningServer
from ..interop.wire import WireClient
from ..server.harness import Client, make_server

GROUPS = 2000


def many_groups(count: int = GROUPS) -> bytes:
    consumers = [
        ConsumerData(f"group_{i}", "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET",
                     [build_subscription("T", "*", 1)], False)
        for i in range(count)
    ]  # fmt: skip
    return HeartbeatData("many@1", [ProducerData("pg")], consumers).to_json()


def test_groups_are_registered_in_slices_and_written_off_the_reactor(tmp_path, monkeypatch) -> None:
    writers: list[int] = []
    real_write = files.write_json_atomic

    def recording(path, value) -> None:
        writers.append(threading.get_ident())
        real_write(path, value)

    monkeypatch.setattr(files, "write_json_atomic", recording)
    server, reactor = make_server(tmp_path)
    many, other = Client(server, "many@1"), Client(server, "other@1")
    opaque = many.send(C.HEART_BEAT, body=many_groups())
    assert many.answer(opaque) is None  # the first slice only: the rest come on later reactor turns
    assert len(server.clients.consumers) == 100
    assert other.call(C.GET_ROUTEINFO_BY_TOPIC, topic="TBW102").code == R.SUCCESS
    reactor.advance(0)
    assert many.answer(opaque).code == R.SUCCESS
    assert len(server.clients.consumers) == GROUPS
    assert threading.get_ident() not in writers  # no topics.json write ran on the reactor thread
    server.stop()
    stored = json.loads((tmp_path / "store" / "config" / "topics.json").read_text())
    assert {f"%RETRY%group_{i}" for i in range(GROUPS)} <= set(stored)


def test_a_connection_that_closes_mid_heartbeat_registers_nothing_more(servers, tmp_path) -> None:
    server, reactor = servers(tmp_path)
    many = Client(server, "many@1")
    many.send(C.HEART_BEAT, body=many_groups())
    reactor.advance(0)
    many.conn.connectionLost(None)
    for _ in range(30):
        reactor.advance(0)
    assert all(not group.members for group in server.clients.consumers.values())


@pytest.fixture(scope="module")
def server() -> Iterator[RunningServer]:
    with RunningServer() as running:
        yield running


def test_another_clients_round_trip_stays_short_during_a_huge_heartbeat(server: RunningServer) -> None:
    host, port = server.namesrv.rsplit(":", 1)
    many = socket.create_connection((host, int(port)))
    many.sendall(RemotingCommand(code=C.HEART_BEAT, opaque=1, body=many_groups()).encode())
    decoder = FrameDecoder()
    answer = None
    round_trips = []
    with WireClient(server.namesrv) as other:
        deadline = time.monotonic() + 60
        while answer is None:
            assert time.monotonic() < deadline, "the big heartbeat was never answered"
            started = time.perf_counter()
            assert other.call(C.GET_ROUTEINFO_BY_TOPIC, topic="TBW102").code == R.SUCCESS
            round_trips.append(time.perf_counter() - started)
            if select.select([many], [], [], 0)[0]:
                for payload in decoder.feed(many.recv(1 << 20)):
                    command = RemotingCommand.decode(payload)
                    if command.is_response and command.opaque == 1:
                        answer = command
    many.close()
    assert answer.code == R.SUCCESS
    print(f"huge heartbeat: {len(round_trips)} round trips of another client, slowest {max(round_trips) * 1000:.1f} ms")
    assert max(round_trips) < 0.1


def test_a_topic_whose_config_was_not_yet_written_is_recovered_from_the_store(servers, tmp_path) -> None:
    """topics.json is written a moment after a topic is created: after a crash in between, the
    topic's queues in the store bring its config back, so its messages stay routable."""
    server, _reactor = servers(tmp_path)
    Client(server).send_message("Fresh", queue_id=2)
    server.stop()
    config = tmp_path / "store" / "config" / "topics.json"
    written = json.loads(config.read_text())
    del written["Fresh"]  # as if the process died before the writer thread got to it
    config.write_text(json.dumps(written))
    again, _reactor = servers(tmp_path)
    topic = again.topics.get("Fresh")
    assert topic is not None and topic.read_queue_nums == 3
    assert again.store.max_offset("Fresh", 2) == 1
