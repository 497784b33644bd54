"""Restarts: a clean stop scans nothing; a crash re-dispatches from the checkpoint, cuts torn or
corrupt records and never serves them."""

from __future__ import annotations

import dataclasses
import json

from codec.message import decode_messages
from rmqproxy.broker.store import FLUSH_SYNC, GetStatus

from .conftest import SMALL, crash, msg


def all_bodies(store, topic="T", queue_id=0) -> list[bytes]:
    out, offset = [], 0
    while True:
        r = store.get_message("g", topic, queue_id, offset, 32)
        if r.status != GetStatus.FOUND:
            return out
        out += [m.body for m in decode_messages(r.body, check_crc=True)]
        offset = r.next_begin_offset


def test_clean_restart_scans_nothing_and_keeps_everything(open_store) -> None:
    store = open_store()
    for i in range(50):
        store.put(msg("T", f"m{i}".encode(), i % 3))
    store.offsets.commit("g", "T", 0, 7)
    store.shutdown()
    again = open_store()
    assert again.recovered_records == 0
    assert [again.max_offset("T", q) for q in range(3)] == [17, 17, 16]
    assert all_bodies(again, "T", 1) == [f"m{i}".encode() for i in range(1, 50, 3)]
    assert again.offsets.query("g", "T", 0) == 7
    assert again.put(msg("T", b"next", 0)).result.first_queue_offset == 17


def test_crash_recovers_every_record_past_the_checkpoint(open_store) -> None:
    store = open_store(dataclasses.replace(SMALL, checkpoint_interval_ms=60_000))
    for i in range(120):
        store.put(msg("T", f"m{i}".encode(), 0, KEYS=f"k{i}"))
    crash(store)
    again = open_store(dataclasses.replace(SMALL, checkpoint_interval_ms=60_000))
    assert again.recovered_records > 0
    assert all_bodies(again) == [f"m{i}".encode() for i in range(120)]
    assert again.query_by_key("T", "k77", 5)  # the index was rebuilt past the checkpoint
    assert again.put(msg("T", b"next")).result.first_queue_offset == 120


def _tail(store) -> tuple:
    segment = store.commitlog.files.last
    return segment, store.commitlog.write_pos - segment.base


def test_a_torn_last_record_is_cut_and_never_served(open_store) -> None:
    store = open_store()
    for i in range(10):
        store.put(msg("T", f"m{i}".encode() * 50))
    last_phys = store.put(msg("T", b"torn" * 100)).result.messages[0].physical_offset
    segment, end = _tail(store)
    at = last_phys - segment.base
    segment.mm[at + 200 : end] = bytes(end - at - 200)  # the write never finished
    crash(store)
    again = open_store()
    assert all_bodies(again) == [f"m{i}".encode() * 50 for i in range(10)]
    assert again.max_physical_offset == last_phys
    assert again.put(msg("T", b"again")).result.messages[0].physical_offset == last_phys


def test_a_corrupt_body_fails_crc_and_ends_the_log_there(open_store) -> None:
    store = open_store(dataclasses.replace(SMALL, checkpoint_interval_ms=60_000))
    offsets = [store.put(msg("T", f"m{i}".encode() * 10)).result.messages[0].physical_offset for i in range(5)]
    segment = store.commitlog.files.last
    record = store.read_record(offsets[3])
    body_at = offsets[3] - segment.base + record.index(b"m3m3")
    segment.mm[body_at] ^= 0xFF
    crash(store)
    again = open_store()
    assert all_bodies(again) == [f"m{i}".encode() * 10 for i in range(3)]
    assert again.max_offset("T", 0) == 3


def test_garbage_after_the_end_is_ignored(open_store) -> None:
    store = open_store()
    store.put(msg("T", b"keep"))
    segment, end = _tail(store)
    segment.mm[end : end + 64] = b"\xda\xa3\x20\xa7" * 16  # looks like magic but is not a record
    crash(store)
    again = open_store()
    assert all_bodies(again) == [b"keep"]


def test_checkpoint_lost_means_a_full_scan(open_store, tmp_path) -> None:
    store = open_store()
    for i in range(30):
        store.put(msg("T", f"m{i}".encode(), i % 2))
    crash(store)
    (tmp_path / "store" / "checkpoint").unlink()
    again = open_store()
    assert again.recovered_records == 30
    assert all_bodies(again, "T", 1) == [f"m{i}".encode() for i in range(1, 30, 2)]


def test_sync_flush_acknowledged_messages_survive_a_crash(open_store) -> None:
    config = dataclasses.replace(SMALL, flush_disk_type=FLUSH_SYNC)
    store = open_store(config)
    tickets = [store.put(msg("T", f"s{i}".encode())) for i in range(40)]
    while not all(t.done for t in tickets):
        store.completions.run_pending(timeout=5)
    crash(store)
    again = open_store(config)
    assert all_bodies(again) == [f"s{i}".encode() for i in range(40)]


def test_recovery_after_recovery_is_stable(open_store, tmp_path) -> None:
    store = open_store()
    for i in range(20):
        store.put(msg("T", f"m{i}".encode()))
    crash(store)
    second = open_store()
    second.put(msg("T", b"m20"))
    crash(second)
    third = open_store()
    assert all_bodies(third) == [f"m{i}".encode() for i in range(21)]
    checkpoint = json.loads((tmp_path / "store" / "checkpoint").read_text())
    assert checkpoint["physical"] <= third.max_physical_offset
