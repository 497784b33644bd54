"""The pop service on a whole server with a fake clock: deliveries, invisibility, redelivery with
attempts, the DLQ, FIFO queues, receipts that must not act on the wrong message, held receives
woken exactly, and state that survives a restart (the journal)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqproxy.broker.pop import ANY_QUEUE, InvisibleFull, ReceiptRefused, Receive
from rmqproxy.broker.store import TagFilter
from codec.message import tag_hash
from tests.server.harness import Client, make_server, send_header

TOPIC = "PopT"


def _send(client: Client, count: int, queue_id: int = 0, tags: str = "TagA", start: int = 0) -> None:
    for i in range(start, start + count):
        answer = client.call(10, send_header(TOPIC, queue_id, props=f"TAGS\x01{tags}\x02"), body=f"m{i}".encode())
        assert answer.code == 0, answer.remark


def _receive(group: str = "G", batch: int = 32, invisible_s: float = 10.0, **kw) -> Receive:
    return Receive(group, TOPIC, kw.pop("filter", None), batch, invisible_s, **kw)


@pytest.fixture
def served(tmp_path: Path):
    server, reactor = make_server(tmp_path)
    server.topics.ensure(TOPIC, 2)
    yield server, reactor, Client(server)
    server.stop()


def bodies(deliveries) -> list[bytes]:
    return [d.message.body for d in deliveries]


def test_a_receive_takes_messages_of_every_queue_and_hides_them_until_acked_or_their_time(served) -> None:
    server, reactor, client = served
    _send(client, 2, queue_id=0)
    _send(client, 2, queue_id=1, start=2)
    pops = server.pops
    got = pops.take(_receive(), [0, 1])
    assert sorted(bodies(got)) == [b"m0", b"m1", b"m2", b"m3"] and {d.attempt for d in got} == {1}
    assert pops.take(_receive(), [0, 1]) == []  # invisible now
    pops.ack("G", TOPIC, got[0].handle)
    reactor.advance(10.0)
    again = pops.take(_receive(), [0, 1])
    assert sorted(bodies(again)) == sorted(bodies(got[1:])) and {d.attempt for d in again} == {2}
    assert pops.redeliveries == {("G", TOPIC): 3}


def test_receipts_act_only_on_their_own_delivery(served) -> None:
    server, reactor, client = served
    _send(client, 1)
    pops = server.pops
    first = pops.take(_receive(), [0, 1])[0]
    with pytest.raises(ReceiptRefused):  # another group's
        pops.ack("Other", TOPIC, first.handle)
    with pytest.raises(ReceiptRefused):  # forged: the MAC does not match
        pops.ack("G", TOPIC, first.handle[:-1] + ("0" if first.handle[-1] != "0" else "1"))
    with pytest.raises(ReceiptRefused):
        pops.ack("G", TOPIC, "not a handle")
    new_handle, _ = pops.change_invisible("G", TOPIC, first.handle, 5.0)
    with pytest.raises(ReceiptRefused) as stale:  # the change made the old handle stale
        pops.ack("G", TOPIC, first.handle)
    assert stale.value.expired
    reactor.advance(5.0)
    with pytest.raises(ReceiptRefused):  # its invisibility is over: expired
        pops.ack("G", TOPIC, new_handle)
    second = pops.take(_receive(), [0, 1])[0]
    assert second.attempt == 2
    pops.ack("G", TOPIC, second.handle)
    assert pops.in_flight() == 0


def test_past_its_attempts_a_message_goes_to_the_dead_letter_queue(served) -> None:
    server, reactor, client = served
    _send(client, 1)
    pops = server.pops
    for attempt in (1, 2):
        got = pops.take(_receive(max_attempts=2), [0, 1])
        assert [d.attempt for d in got] == [attempt]
        reactor.advance(10.0)
    assert pops.take(_receive(max_attempts=2), [0, 1]) == []
    assert pops.dlq_forwards == {("G", TOPIC): 1} and pops.in_flight() == 0
    dlq = server.store.message_at("%DLQ%G", 0, 0)
    assert dlq is not None and dlq.body == b"m0"
    assert dlq.properties["DLQ_ORIGIN_TOPIC"] == TOPIC and dlq.reconsume_times == 1


def test_a_fifo_queue_gives_its_next_message_only_once_the_previous_is_acked(served) -> None:
    server, reactor, client = served
    _send(client, 3, queue_id=0)
    pops = server.pops
    first = pops.take(_receive(batch=1, fifo=True), [0, 1])
    assert bodies(first) == [b"m0"]
    assert pops.take(_receive(batch=1, fifo=True), [0, 1]) == []  # queue 0 blocked, queue 1 empty
    reactor.advance(10.0)  # not acked: the same message again, before anything after it
    again = pops.take(_receive(batch=1, fifo=True), [0, 1])
    assert bodies(again) == [b"m0"] and again[0].attempt == 2
    pops.ack("G", TOPIC, again[0].handle)
    assert bodies(pops.take(_receive(batch=2, fifo=True), [0, 1])) == [b"m1", b"m2"]


def test_a_tag_filter_skips_other_tags_and_moves_the_cursor_past_them(served) -> None:
    server, reactor, client = served
    _send(client, 2, tags="TagB")
    _send(client, 1, tags="TagA", start=2)
    pops = server.pops
    got = pops.take(_receive(filter=TagFilter(frozenset({tag_hash("TagA")}))), [0])
    assert bodies(got) == [b"m2"]
    pops.ack("G", TOPIC, got[0].handle)
    pops.commit_offsets()
    assert server.store.offsets.query("G", TOPIC, 0) == 3


def test_the_committed_offset_is_the_oldest_message_not_acked(served) -> None:
    server, reactor, client = served
    _send(client, 3)
    pops = server.pops
    got = pops.take(_receive(), [0])
    pops.ack("G", TOPIC, got[1].handle)
    pops.ack("G", TOPIC, got[2].handle)
    pops.commit_offsets()
    assert server.store.offsets.query("G", TOPIC, 0) == 0  # m0 still in flight
    pops.ack("G", TOPIC, got[0].handle)
    pops.commit_offsets()
    assert server.store.offsets.query("G", TOPIC, 0) == 3


def test_too_many_in_flight_is_refused(served) -> None:
    server, reactor, client = served
    _send(client, 3, queue_id=0)
    _send(client, 3, queue_id=1, start=3)
    pops = server.pops
    pops.max_in_flight = 2
    got = pops.take(_receive(batch=2), [0, 1])
    assert len(got) == 2
    with pytest.raises(InvisibleFull):
        pops.take(_receive(), [0, 1])


def test_a_held_receive_ends_at_its_deadline_to_the_tick(served) -> None:
    server, reactor, client = served
    outcome = []
    d = server.pops.receive(_receive(), [0, 1], conn="c", deadline=reactor.seconds() + 2.5)
    d.addCallback(outcome.append)
    assert server.holds.count == 1 and not outcome
    reactor.advance(2.499)
    assert not outcome
    reactor.advance(0.001)
    [received] = outcome
    assert received.deliveries == [] and received.wake == "timeout" and server.holds.count == 0


def test_a_held_receive_wakes_on_an_arrival_in_any_queue_of_its_topic(served) -> None:
    server, reactor, client = served
    outcome = []
    server.pops.receive(_receive(), [0, 1], conn="c", deadline=reactor.seconds() + 20).addCallback(outcome.append)
    _send(client, 1, queue_id=1)
    [received] = outcome
    assert bodies(received.deliveries) == [b"m0"] and received.wake == "arrival"
    assert received.answered == received.held_since  # no clock moved: woken at once


def test_a_held_receive_whose_tag_does_not_arrive_keeps_waiting(served) -> None:
    server, reactor, client = served
    outcome = []
    flt = TagFilter(frozenset({tag_hash("TagA")}))
    server.pops.receive(_receive(filter=flt), [0, 1], conn="c", deadline=reactor.seconds() + 20).addCallback(outcome.append)
    _send(client, 1, tags="TagB")
    assert not outcome and server.holds.count == 1
    _send(client, 1, tags="TagA", start=1)
    assert bodies(outcome[0].deliveries) == [b"m1"]


def test_a_message_visible_again_wakes_a_held_receive_at_its_time(served) -> None:
    server, reactor, client = served
    _send(client, 1)
    pops = server.pops
    pops.take(_receive(invisible_s=3.0), [0, 1])
    outcome = []
    pops.receive(_receive(), [0, 1], conn="c", deadline=reactor.seconds() + 20).addCallback(outcome.append)
    reactor.advance(2.999)
    assert not outcome
    reactor.advance(0.001)
    [received] = outcome
    assert bodies(received.deliveries) == [b"m0"] and received.wake == "returned" and received.deliveries[0].attempt == 2


def test_a_cancelled_receive_leaves_the_hold_service(served) -> None:
    server, reactor, client = served
    outcome = []
    d = server.pops.receive(_receive(), [0, 1], conn="c", deadline=reactor.seconds() + 20)
    d.addCallback(outcome.append)
    server.pops.cancel(d)
    assert server.holds.count == 0 and server.pops.waiting() == 0
    _send(client, 1)
    assert not outcome


def test_auto_renewed_messages_stay_invisible_while_their_client_is_online(served) -> None:
    server, reactor, client = served
    _send(client, 1)
    pops = server.pops
    server.grpc.open_session("c1", "10.0.0.9:4000", lambda _item: None)  # its Telemetry stream is open
    got = pops.take(_receive(invisible_s=60.0, renew_for="c1"), [0, 1])
    for _ in range(30):  # 150 s, past the first 60 s: the server's 5 s renewal keeps it invisible
        reactor.advance(5.0)
    assert pops.take(_receive(), [0, 1]) == []
    pops.ack("G", TOPIC, got[0].handle)  # the client's handle is still good
    _send(client, 1, start=1)
    pops.take(_receive(invisible_s=60.0, renew_for="c1"), [0, 1])
    server.grpc.end_session("c1")
    reactor.advance(0.999)
    assert pops.take(_receive(), [0, 1]) == []
    reactor.advance(0.001)
    assert bodies(pops.take(_receive(), [0, 1])) == [b"m1"]


def test_pop_state_survives_a_restart(tmp_path: Path) -> None:
    server, reactor = make_server(tmp_path)
    server.topics.ensure(TOPIC, 2)
    client = Client(server)
    _send(client, 3)
    pops = server.pops
    got = pops.take(_receive(invisible_s=30.0), [0])
    pops.ack("G", TOPIC, got[0].handle)
    kept = got[1].handle
    changed, _ = pops.change_invisible("G", TOPIC, got[2].handle, 5.0)
    server.stop()
    server, reactor = make_server(tmp_path, started_after_s=1.0)
    pops = server.pops
    try:
        assert pops.in_flight("G") == 2
        pops.ack("G", TOPIC, kept)  # a handle from before the restart still acks
        with pytest.raises(ReceiptRefused):
            pops.ack("G", TOPIC, got[2].handle)  # stale before the restart, stale after
        assert pops.take(_receive(), [0]) == []  # m2 invisible for 4 s more; m0 acked
        reactor.advance(4.0)
        again = pops.take(_receive(), [0])
        assert bodies(again) == [b"m2"] and again[0].attempt == 2
    finally:
        server.stop()


def test_a_torn_last_journal_line_is_ignored(tmp_path: Path) -> None:
    server, reactor = make_server(tmp_path)
    server.topics.ensure(TOPIC, 2)
    _send(Client(server), 1)
    got = server.pops.take(_receive(invisible_s=30.0), [0])
    server.stop()
    with open(tmp_path / "store" / "pop" / "journal", "ab") as journal:
        journal.write(b"A G PopT 0")  # a crash mid-write
    server, reactor = make_server(tmp_path)
    try:
        server.pops.ack("G", TOPIC, got[0].handle)
        assert server.pops.in_flight() == 0
    finally:
        server.stop()


def test_the_journal_is_rewritten_when_it_grows(served, monkeypatch) -> None:
    from rmqproxy.broker import pop

    server, reactor, client = served
    _send(client, 4)
    pops = server.pops
    got = pops.take(_receive(), [0])
    for d in got[:3]:
        pops.ack("G", TOPIC, d.handle)
    monkeypatch.setattr(pop, "JOURNAL_MAX_BYTES", 10)
    pops.fsync()
    text = (server.config.store_dir / "pop" / "journal").read_text().splitlines()
    assert sorted(line.split()[0] for line in text) == ["C", "P"]  # the cursor and the one in flight
    pops.ack("G", TOPIC, got[3].handle)


def test_any_queue_is_minus_one() -> None:
    assert ANY_QUEUE == -1


def test_a_group_that_starts_at_a_queues_end_keeps_that_start(served) -> None:
    """A new group starting at the end (the queue's start no longer in memory) must not move its
    start with the end between receives: a message sent in between is still delivered."""
    server, reactor, client = served
    _send(client, 2)
    pops = server.pops
    server.store.in_disk = lambda topic, queue_id, offset: True  # the queue's start is out of memory
    assert pops.take(_receive(group="Late"), [0]) == []
    _send(client, 1, start=2)
    assert bodies(pops.take(_receive(group="Late"), [0])) == [b"m2"]
