"""Lookups by physical offset, queue offset, store time, key and unique id; offsets; delay."""

from __future__ import annotations

import dataclasses

from codec.message import decode_message
from rmqproxy.broker.store import GetStatus

from .conftest import SMALL, msg


def test_look_up_by_physical_and_queue_offset(open_store) -> None:
    store = open_store()
    stored = [store.put(msg("T", f"m{i}".encode(), 1)).result.messages[0] for i in range(3)]
    assert store.look_message(stored[1].physical_offset).body == b"m1"
    assert store.message_at("T", 1, 2).body == b"m2"
    assert store.look_message(stored[2].physical_offset + 1) is None
    assert store.look_message(10**9) is None and store.message_at("T", 1, 3) is None


def test_search_offset_by_timestamp(open_store, clock) -> None:
    store = open_store()
    assert store.search_offset_by_timestamp("T", 0, 123) == 0  # empty
    times = [1000, 2000, 2000, 3000, 5000]
    for i, t in enumerate(times):
        clock.now = t / 1000
        store.put(msg("T", f"m{i}".encode()))
    search = lambda ts: store.search_offset_by_timestamp("T", 0, ts)  # noqa: E731
    assert search(2000) == 1  # equal: the first such message
    assert search(500) == 0  # all later: the first offset
    assert search(9000) == 4  # all earlier: the last message
    assert search(3900) == 3 and search(4100) == 4  # nearest
    assert search(4000) == 3  # equal distance: the earlier
    assert store.earliest_message_time("T", 0) == 1000


def test_query_by_key_and_unique_id_checks_each_hit(open_store) -> None:
    store = open_store()
    store.put(msg("T", b"a", 0, KEYS="order-1 shared", UNIQ_KEY="U-A"))
    store.put(msg("T", b"b", 1, KEYS="order-2 shared", UNIQ_KEY="U-B"))
    store.put(msg("U", b"c", 0, KEYS="order-1"))
    bodies = lambda topic, key, n=10: [decode_message(r)[0].body for r in store.query_by_key(topic, key, n)]  # noqa: E731
    assert bodies("T", "order-1") == [b"a"]
    assert bodies("T", "shared") == [b"b", b"a"]  # newest first
    assert bodies("T", "shared", 1) == [b"b"]
    assert bodies("T", "U-B") == [b"b"]
    assert bodies("T", "nope") == [] and bodies("U", "order-1") == [b"c"]


def test_consumer_offsets_persist_atomically(open_store, tmp_path) -> None:
    store = open_store()
    store.offsets.commit("g1", "T", 0, 5)
    store.offsets.commit("g1", "T", 1, 9)
    store.offsets.commit("g2", "%RETRY%g2", 0, 1)
    assert store.offsets.query("g1", "T", 2) is None
    store.shutdown()
    saved = (tmp_path / "store" / "config" / "consumerOffset.json").read_text()
    assert '"T@g1":{"0":5,"1":9}' in saved
    again = open_store()
    assert again.offsets.query("g1", "T", 1) == 9 and again.offsets.query("g2", "%RETRY%g2", 0) == 1


def test_delayed_messages_are_parked_then_delivered_when_due(open_store, clock) -> None:
    store = open_store()
    arrivals = []
    store.add_arrival_listener(lambda a: arrivals.append(a.topic))
    result = store.put(msg("T", b"later", 2, DELAY="3", KEYS="k")).result  # level 3 = 10 s
    assert result.ok and store.max_offset("T", 2) == 0
    assert store.deliver_due() == 1_700_000_010_000
    clock.now += 9.999
    assert store.deliver_due() is not None and store.max_offset("T", 2) == 0
    clock.now += 0.001
    assert store.deliver_due() is None
    delivered = store.message_at("T", 2, 0)
    assert delivered.body == b"later" and "DELAY" not in delivered.properties
    assert "REAL_TOPIC" not in delivered.properties and delivered.properties["KEYS"] == "k"
    assert arrivals == ["SCHEDULE_TOPIC_XXXX", "T"]


def test_delay_delivery_offsets_survive_restart(open_store, clock) -> None:
    store = open_store()
    store.put(msg("T", b"one", 0, DELAY="1"))
    store.put(msg("T", b"two", 0, DELAY="2"))
    clock.now += 1.5
    store.deliver_due()
    store.shutdown()
    again = open_store()
    assert again.max_offset("T", 0) == 1
    clock.now += 10
    again.deliver_due()
    assert [again.message_at("T", 0, i).body for i in range(2)] == [b"one", b"two"]


def test_retention_keeps_the_current_segment_and_young_segments(open_store, clock) -> None:
    store = open_store(dataclasses.replace(SMALL, file_reserved_time_hours=1))
    for _ in range(8):
        store.put(msg("T", bytes(20_000)))
    assert store.delete_expired() == 0  # young
    clock.now += 3600.5
    deleted = store.delete_expired()
    assert deleted == len(store.commitlog.files.segments) + deleted - 1
    assert store.get_message("g", "T", 0, store.min_offset("T", 0), 32).status == GetStatus.FOUND


def test_queue_entries_stop_at_the_end_of_the_file_holding_the_start(open_store) -> None:
    """QUERY_CONSUME_QUEUE's view: (physical offset, size, tags code) per entry, never past the
    consume-queue file the first one is in (64 entries per file here), nor the queue's end."""
    store = open_store()
    stored = [store.put(msg("T", b"x" * (i % 5 + 1), 0, TAGS="TagA")).result.messages[0] for i in range(70)]
    entries = store.queue_entries("T", 0, 60, 100)
    assert [phys for phys, _size, _tags in entries] == [m.physical_offset for m in stored[60:64]]
    assert {tags for _phys, _size, tags in entries} == {store._tag_code("TagA")}
    assert len(store.queue_entries("T", 0, 64, 100)) == 6  # the next file, up to the queue's end
    assert store.queue_entries("T", 0, 70, 5) == [] and store.queue_entries("T", 0, 0, 0) == []
    assert store.queue_entries("T", 0, -1, 5) == [] and store.queue_entries("Nope", 0, 0, 5) == []


def test_cloning_offsets_replaces_the_destinations_entry_for_the_topic(open_store) -> None:
    offsets = open_store().offsets
    offsets.commit("src", "T", 0, 5)
    offsets.commit("src", "T", 1, 7)
    offsets.commit("src", "U", 0, 9)
    offsets.commit("dst", "T", 2, 1)
    offsets.commit("dst", "U", 0, 3)
    assert offsets.clone("src", "dst", "T")
    assert {k: v for k, v in offsets.table().items() if k[0] == "dst"} == {
        ("dst", "T", 0): 5, ("dst", "T", 1): 7, ("dst", "U", 0): 3}
    assert not offsets.clone("nobody", "dst", "T") and offsets.query("dst", "T", 0) == 5
    assert offsets.topics_of("src") == {"T", "U"}
