"""A failure while waking held pulls can never fail a send whose message is stored, nor stop the
server from closing its store (issue 25); the pull's client gets SYSTEM_ERROR, which it retries.
It once answered the producer code 1 for a stored message, so a client retry stored it twice,
and left the held pull in the table."""

from __future__ import annotations

from codec.codes import PullSysFlag, ResponseCode as R
from codec.message import decode_messages
from rmqproxy.broker.store import Arrival

from .harness import Client, make_server


def _boom(*_args: object) -> None:
    raise RuntimeError("a listener bug")


def test_a_listener_that_raises_leaves_the_send_answered_ok_and_the_message_readable(tmp_path) -> None:
    server, _reactor = make_server(tmp_path)
    server.store.add_arrival_listener(_boom)
    client = Client(server)
    answer = client.send_message("T", b"stored once")
    assert answer.code == R.SUCCESS, answer
    assert server.store.listener_failures == 1
    got = client.answer(client.pull_message("T", 0))
    assert got.code == R.SUCCESS and [m.body for m in decode_messages(got.body)] == [b"stored once"]
    server.stop()
    assert server.store._closed


def test_a_held_pull_that_fails_on_wake_is_dropped_and_the_send_still_succeeds(tmp_path, monkeypatch) -> None:
    server, _reactor = make_server(tmp_path)
    consumer, producer = Client(server, "c@1"), Client(server, "p@1")
    opaque = consumer.pull_message("T", 0, sys_flag=PullSysFlag.SUSPEND)  # T does not exist yet: create it, then hold
    assert consumer.answer(opaque).code != R.SUCCESS
    producer.send_message("T", b"first")
    held = consumer.pull_message("T", 1, sys_flag=PullSysFlag.SUSPEND)
    assert consumer.answer(held) is None and server.holds.count == 1
    monkeypatch.setattr(server.pulls, "_answer", _boom)
    assert producer.send_message("T", b"wakes it").code == R.SUCCESS
    assert server.holds.failures == 1 and server.holds.count == 0 and not server.holds.held()
    assert consumer.answer(held).code == R.SYSTEM_ERROR and consumer.conn.in_flight == 0  # it retries
    server.stop()
    assert server.store._closed


def test_stop_closes_the_store_even_when_answering_held_pulls_fails(tmp_path, monkeypatch) -> None:
    server, _reactor = make_server(tmp_path)
    consumer, producer = Client(server, "c@1"), Client(server, "p@1")
    producer.send_message("T", b"first")
    for queue_offset in (1, 1, 1):
        assert consumer.answer(consumer.pull_message("T", queue_offset, sys_flag=PullSysFlag.SUSPEND)) is None
    monkeypatch.setattr(server.pulls, "_answer", _boom)
    server.stop()
    assert server.holds.failures == 3 and server.store._closed


def test_arrival_listeners_receive_the_arrival_value(servers, tmp_path) -> None:
    server, _reactor = servers(tmp_path)
    seen: list[Arrival] = []
    server.store.add_arrival_listener(seen.append)
    Client(server).send_message("T", b"x", queue_id=1, tags="TagA")
    assert [(a.topic, a.queue_id, a.queue_offset) for a in seen] == [("T", 1, 0)]
