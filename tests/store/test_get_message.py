"""get_message: every status, next/min/max offsets and transfer limits, as the 4.9.8 store."""

from __future__ import annotations

import dataclasses

import pytest

from codec.javacompat import string_hash
from codec.message import decode_messages
from rmqproxy.broker.store import GetStatus, TagFilter

from .conftest import SMALL, msg


def put_n(store, n: int, topic: str = "T", queue_id: int = 0, **props: str) -> None:
    for i in range(n):
        assert store.put(msg(topic, f"m{i}".encode(), queue_id, **props)).result.ok


def test_unknown_queue_is_no_matched_logic_queue(open_store) -> None:
    r = open_store().get_message("g", "T", 0, 5, 32)
    assert (r.status, r.next_begin_offset, r.min_offset, r.max_offset) == (GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)


def test_empty_queue_is_no_message_in_queue(open_store) -> None:
    store = open_store()
    store.put(msg("T", queue_id=1))  # creates topic T; queue 0 gets a file only when written
    store.queue_table.open("T", 0)
    r = store.get_message("g", "T", 0, 3, 32)
    assert (r.status, r.next_begin_offset, r.max_offset) == (GetStatus.NO_MESSAGE_IN_QUEUE, 0, 0)


def test_found_returns_stored_records_and_next_offset(open_store) -> None:
    store = open_store()
    put_n(store, 5)
    r = store.get_message("g", "T", 0, 1, 32)
    assert (r.status, r.next_begin_offset, r.min_offset, r.max_offset) == (GetStatus.FOUND, 5, 0, 5)
    messages = decode_messages(r.body, check_crc=True)
    assert [m.body for m in messages] == [b"m1", b"m2", b"m3", b"m4"]
    assert [m.queue_offset for m in messages] == [1, 2, 3, 4]
    assert all(m.store_timestamp == 1_700_000_000_000 for m in messages)


def test_offset_at_max_is_overflow_one_and_past_it_overflow_badly(open_store) -> None:
    store = open_store()
    put_n(store, 3)
    one = store.get_message("g", "T", 0, 3, 32)
    assert (one.status, one.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_ONE, 3)
    badly = store.get_message("g", "T", 0, 10, 32)
    assert (badly.status, badly.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 3)


def test_max_msgs_and_the_32_message_in_memory_cap(open_store) -> None:
    store = open_store()
    put_n(store, 40)
    assert store.get_message("g", "T", 0, 0, 7).next_begin_offset == 7
    r = store.get_message("g", "T", 0, 0, 100)
    assert (len(r.messages), r.next_begin_offset) == (32, 32)


def test_byte_cap_stops_before_the_record_that_would_exceed_it_but_first_always_returned(open_store) -> None:
    store = open_store(dataclasses.replace(SMALL, max_transfer_bytes_on_message_in_memory=400))
    for _ in range(4):
        store.put(msg("T", bytes(150), 0))
    r = store.get_message("g", "T", 0, 0, 32)
    size = len(r.messages[0])
    assert len(r.messages) == 400 // size and r.next_begin_offset == len(r.messages)
    huge = store.get_message("g", "T", 0, 0, 32, max_bytes=1)  # 5.x maxMsgBytes
    assert len(huge.messages) == 1 and huge.next_begin_offset == 1


def test_tag_filter_skips_by_hash_and_counts_examined_entries(open_store) -> None:
    store = open_store()
    for tag in ["TagB", "TagA", "TagB", "TagA", "TagC"]:
        store.put(msg("T", tag.encode(), 0, TAGS=tag))
    wanted = TagFilter(frozenset({string_hash("TagA")}))
    r = store.get_message("g", "T", 0, 0, 32, wanted)
    assert [m.body for m in decode_messages(r.body)] == [b"TagA", b"TagA"]
    assert r.next_begin_offset == 5  # every examined entry counts
    miss = store.get_message("g", "T", 0, 4, 32, wanted)
    assert (miss.status, miss.next_begin_offset) == (GetStatus.NO_MATCHED_MESSAGE, 5)
    assert store.get_message("g", "T", 0, 0, 32, TagFilter(None)).next_begin_offset == 5


def test_untagged_messages_never_match_a_tag_filter(open_store) -> None:
    store = open_store()
    store.put(msg("T", b"plain"))
    r = store.get_message("g", "T", 0, 0, 32, TagFilter(frozenset({0, string_hash("TagA")} - {0})))
    assert r.status == GetStatus.NO_MATCHED_MESSAGE


def test_scan_stops_at_the_end_of_a_consume_queue_file(open_store) -> None:
    store = open_store()  # 64 entries per consume-queue file
    put_n(store, 70, TAGS="TagB")
    r = store.get_message("g", "T", 0, 60, 32, TagFilter(frozenset({string_hash("TagA")})))
    assert (r.status, r.next_begin_offset) == (GetStatus.NO_MATCHED_MESSAGE, 64)


def test_filter_scan_examines_at_most_800_entries(open_store, tmp_path) -> None:
    store = open_store(dataclasses.replace(SMALL, mapped_file_size_consume_queue_entries=2000,
                                           mapped_file_size_commit_log=1 << 20))  # fmt: skip
    put_n(store, 900, TAGS="TagB")
    r = store.get_message("g", "T", 0, 0, 32, TagFilter(frozenset({1})))
    assert (r.status, r.next_begin_offset) == (GetStatus.NO_MATCHED_MESSAGE, 800)


def test_offset_too_small_after_retention_moves_the_minimum(open_store, clock) -> None:
    store = open_store(dataclasses.replace(SMALL, file_reserved_time_hours=1))
    put_n(store, 20)
    for _ in range(6):  # 20 KB records: fills the first 64 KiB segments
        store.put(msg("T", bytes(20_000)))
    clock.now += 2 * 3600
    store.put(msg("T", b"fresh"))
    assert store.delete_expired() >= 1
    low = store.min_offset("T", 0)
    assert low > 20
    r = store.get_message("g", "T", 0, 0, 32)
    assert (r.status, r.next_begin_offset, r.min_offset) == (GetStatus.OFFSET_TOO_SMALL, low, low)
    assert store.get_message("g", "T", 0, low, 32).status == GetStatus.FOUND


def test_message_was_removing_when_every_examined_record_is_gone(open_store) -> None:
    store = open_store()
    put_n(store, 3)
    store.commitlog.files.drop(store.commitlog.files.first)  # records gone, entries not yet corrected
    r = store.get_message("g", "T", 0, 0, 32)
    assert (r.status, r.next_begin_offset) == (GetStatus.MESSAGE_WAS_REMOVING, 3)


def test_reading_past_a_removed_segment_resumes_in_the_next_one(open_store) -> None:
    store = open_store()
    put_n(store, 3)
    for _ in range(4):
        store.put(msg("T", bytes(20_000)))
    first = store.commitlog.files.first
    store.commitlog.files.drop(first)
    r = store.get_message("g", "T", 0, 0, 32)
    found = decode_messages(r.body)
    assert r.status == GetStatus.FOUND
    assert found[0].physical_offset == first.end  # the first record of the next segment
    assert found[0].queue_offset == 6


@pytest.mark.parametrize("count", [1, 33])
def test_reads_do_not_change_state(open_store, count) -> None:
    store = open_store()
    put_n(store, count)
    first = store.get_message("g", "T", 0, 0, 32)
    assert store.get_message("g", "T", 0, 0, 32) == first
