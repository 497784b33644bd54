"""5.x timer messages on the whole server (fake reactor): parked out of sight, delivered at the
time asked (not a tick later), refused with the reference's codes when illegal, kept across a
restart without a second delivery, and delivered in time order past the in-memory capacity."""

from __future__ import annotations

import random

import pytest

from codec.codes import RequestCode as C
from codec.codes import ResponseCode as R
from codec.message import BatchItem, decode_messages, encode_batch
from rmqproxy.core.delay_levels import TIMER_TOPIC
from rmqproxy.broker.timer_messages import TIMER_GROUP

from .harness import Client, make_server
from .harness import send_header


def send_timed(client: Client, props: str, body: bytes = b"later", topic: str = "Timed", queue_id: int = 1):
    return client.call(C.SEND_MESSAGE_V2, send_header(topic, queue_id, props), body)


def delivered(server, topic: str = "Timed", queue_id: int = 1) -> list:
    """Every message readable in the queue, in queue order."""
    reader, found = Client(server, "10.0.0.9@reader#1"), []
    while True:
        answer = reader.answer(reader.pull_message(topic, len(found), queue_id=queue_id))
        if answer is None or answer.code != R.SUCCESS:
            return found
        found += decode_messages(answer.body)


@pytest.fixture
def timed(tmp_path):
    server, reactor = make_server(tmp_path)
    yield server, reactor
    server.stop()


@pytest.mark.parametrize(("props", "after_s"), [
    ("TIMER_DELAY_SEC\x013", 3.0), ("TIMER_DELAY_MS\x011500", 1.5), ("TIMER_DELIVER_MS\x01{deliver}", 2.25),
    ("TIMER_DELAY_SEC\x012\x02TIMER_DELAY_MS\x01100000\x02TIMER_DELIVER_MS\x011", 2.0),  # SEC wins, then MS
])  # fmt: skip
def test_a_timer_message_is_delivered_at_its_time_and_not_before(timed, props: str, after_s: float) -> None:
    server, reactor = timed
    now_ms = int(reactor.seconds() * 1000)
    client = Client(server)
    assert send_timed(client, props.format(deliver=now_ms + 2250)).code == R.SUCCESS
    assert delivered(server) == [] and server.store.max_offset(TIMER_TOPIC, 0) == 1
    assert server.registry.get_sample_value("rmqproxy_timer_messages_pending") == 1
    reactor.advance(after_s - 0.001)
    assert delivered(server) == []
    reactor.advance(0.001)
    [msg] = delivered(server)
    assert msg.body == b"later" and msg.topic == "Timed" and msg.queue_id == 1
    assert "REAL_TOPIC" not in msg.properties and "REAL_QID" not in msg.properties
    assert int(msg.properties["TIMER_OUT_MS"]) == now_ms + int(after_s * 1000)
    assert msg.properties["TIMER_ENQUEUE_MS"] == str(now_ms)
    assert msg.properties["TIMER_DEQUEUE_MS"] == str(now_ms + int(after_s * 1000))
    assert server.registry.get_sample_value("rmqproxy_timer_messages_pending") == 0
    assert server.registry.get_sample_value("rmqproxy_timer_messages_delivered_total") == 1


def test_a_time_already_past_is_delivered_at_once(timed) -> None:
    server, _reactor = timed
    assert send_timed(Client(server), "TIMER_DELIVER_MS\x011000").code == R.SUCCESS
    assert [m.body for m in delivered(server)] == [b"later"]


def test_illegal_timer_messages_get_the_reference_answers(servers, tmp_path) -> None:
    server, _ = servers(tmp_path, timer_max_delay_sec=60)
    client = Client(server)
    too_long = send_timed(client, "TIMER_DELAY_SEC\x0161")
    assert too_long.code == R.MESSAGE_ILLEGAL
    assert too_long.remark.startswith("timer message illegal, the delay time should not be bigger than the max delay 60000ms")
    assert send_timed(client, "TIMER_DELAY_MS\x01soon").code == R.MESSAGE_ILLEGAL
    assert send_timed(client, "TIMER_DELAY_SEC\x015\x02TIMER_DEL_UNIQKEY\x01x").code == R.SYSTEM_ERROR
    batch = encode_batch([BatchItem(b"a", {"TIMER_DELAY_SEC": "5"}), BatchItem(b"b")])
    assert client.call(C.SEND_BATCH_MESSAGE, send_header("Timed", 0, "", batch=True), batch).code == R.MESSAGE_ILLEGAL
    tx = send_timed(client, "TRAN_MSG\x01true\x02PGROUP\x01pg\x02TIMER_DELAY_SEC\x015")
    assert tx.code == R.MESSAGE_ILLEGAL
    assert server.store.max_offset(TIMER_TOPIC, 0) == 0 and delivered(server) == []
    server.stop()
    server, _ = servers(tmp_path, timer_wheel_enable=False)
    off = send_timed(Client(server), "TIMER_DELAY_SEC\x015")
    assert (off.code, off.remark) == (R.SYSTEM_ERROR, "accurate timer message is not enabled, timerWheelEnable is false")


def test_a_delay_level_wins_over_timer_properties_as_in_the_reference(timed) -> None:
    server, _reactor = timed
    assert send_timed(Client(server), "DELAY\x012\x02TIMER_DELAY_SEC\x01600").code == R.SUCCESS
    parked = server.store.message_at("SCHEDULE_TOPIC_XXXX", 1, 0)
    assert parked.properties["REAL_TOPIC"] == "Timed" and "TIMER_DELAY_SEC" not in parked.properties
    assert server.store.max_offset(TIMER_TOPIC, 0) == 0


def test_timers_survive_a_restart_and_none_is_delivered_twice(servers, tmp_path) -> None:
    server, reactor = make_server(tmp_path)
    client = Client(server)
    for seconds, key in ((1, "a"), (5, "b"), (30, "c")):
        assert send_timed(client, f"TIMER_DELAY_SEC\x01{seconds}\x02UNIQ_KEY\x01{key}", key.encode()).code == 0
    reactor.advance(1.0)
    assert [m.body for m in delivered(server)] == [b"a"]
    server.stop()
    server, reactor = servers(tmp_path)  # the fake clock starts where the first one did
    assert [m.body for m in delivered(server)] == [b"a"]  # "a" is not delivered again
    reactor.advance(5.0)
    assert [m.body for m in delivered(server)] == [b"a", b"b"]
    reactor.advance(25.0)
    assert [m.body for m in delivered(server)] == [b"a", b"b", b"c"]


def test_past_its_capacity_the_service_still_delivers_every_timer_once_in_time_order(timed) -> None:
    server, reactor = timed
    server.timers.capacity = 8
    rng = random.Random(5)
    client = Client(server)
    delays = [rng.randint(1, 400) * 10 for _ in range(60)]
    for i, delay in enumerate(delays):
        assert send_timed(client, f"TIMER_DELAY_MS\x01{delay}", str(i).encode(), queue_id=0).code == 0
    assert server.timers.pending <= 8
    for _ in range(500):
        reactor.advance(0.01)
    bodies = [int(m.body) for m in delivered(server, queue_id=0)]
    assert sorted(bodies) == list(range(60))  # each once
    assert [delays[i] for i in bodies] == sorted(delays)  # in the order they were due


def test_timers_due_while_down_are_delivered_at_start_but_not_those_already_delivered(servers, tmp_path) -> None:
    server, reactor = make_server(tmp_path)
    client = Client(server)
    for seconds, key in ((1, "a"), (5, "b")):
        assert send_timed(client, f"TIMER_DELAY_SEC\x01{seconds}\x02UNIQ_KEY\x01{key}", key.encode()).code == 0
    reactor.advance(1.0)
    server.store.offsets.commit(TIMER_GROUP, TIMER_TOPIC, 0, 0)  # as if a kill -9 lost the progress after "a"
    server.stop()
    server, reactor = servers(tmp_path, started_after_s=10.0)  # down while "b" came due
    assert [m.body for m in delivered(server)] == [b"a", b"b"]  # "b" at start, "a" not again


def test_timers_due_in_the_same_millisecond_are_all_delivered_past_the_capacity(timed) -> None:
    server, reactor = timed
    server.timers.capacity = 8
    client = Client(server)
    for i in range(20):
        assert send_timed(client, "TIMER_DELAY_MS\x01500" if i < 12 else "TIMER_DELAY_MS\x01900", str(i).encode(),
                          queue_id=0).code == 0  # fmt: skip
    reactor.advance(1.0)
    assert sorted(int(m.body) for m in delivered(server, queue_id=0)) == list(range(20))
