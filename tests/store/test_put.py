"""Puts: offsets, stored fields, batches, limits, arrival listeners, SYNC_FLUSH group commit."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap

from codec.message import decode_message, decode_messages
from rmqproxy.broker.store import FLUSH_SYNC, MessageStore, PutStatus, StoreConfig
from tests.implementations import child_env

from .conftest import SMALL, msg


def test_queue_offsets_start_at_zero_per_queue_and_physical_offsets_are_global(open_store) -> None:
    store = open_store()
    a = store.put(msg("T", b"a", 0)).result
    b = store.put(msg("T", b"b", 1)).result
    c = store.put(msg("U", b"c", 0)).result
    d = store.put(msg("T", b"d", 0)).result
    assert [r.first_queue_offset for r in (a, b, c, d)] == [0, 0, 0, 1]
    phys = [r.messages[0].physical_offset for r in (a, b, c, d)]
    assert phys == sorted(phys) and phys[0] == 0


def test_stored_record_has_store_fields_and_offset_id(open_store) -> None:
    store = open_store()
    result = store.put(msg("T", b"hello", 2, TAGS="TagA", KEYS="k1 k2", UNIQ_KEY="U1")).result
    (stored,) = result.messages
    record = store.read_record(stored.physical_offset)
    back, _ = decode_message(record, check_crc=True)
    assert (back.topic, back.queue_id, back.queue_offset, back.physical_offset) == ("T", 2, 0, stored.physical_offset)
    assert back.store_host == store.config.store_host and back.store_timestamp == 1_700_000_000_000
    assert back.properties == {"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "U1"}
    assert result.msg_ids == [back.offset_msg_id]


def test_batch_takes_consecutive_offsets_with_own_properties(open_store) -> None:
    store = open_store()
    store.put(msg("T", b"before"))
    result = store.put_batch([msg("T", f"b{i}".encode(), 0, KEYS=f"k{i}") for i in range(3)]).result
    assert result.ok and [m.queue_offset for m in result.messages] == [1, 2, 3]
    got = decode_messages(store.get_message("g", "T", 0, 1, 32).body)
    assert [m.properties["KEYS"] for m in got] == ["k0", "k1", "k2"]


def test_records_never_span_segments(open_store) -> None:
    store = open_store()  # 64 KiB segments
    offsets = [store.put(msg("T", bytes(9000))).result.messages[0].physical_offset for _ in range(20)]
    size = store.commitlog.segment_size
    for phys in offsets:
        record = store.read_record(phys)
        assert phys // size == (phys + len(record) - 1) // size
    assert len(decode_messages(store.get_message("g", "T", 0, 0, 32).body, check_crc=True)) == 20


def test_oversized_bodies_and_properties_are_refused(open_store) -> None:
    store = open_store(dataclasses.replace(SMALL, max_message_size=100))
    assert store.put(msg("T", bytes(101))).result.status == PutStatus.MESSAGE_ILLEGAL
    big_props = msg("T", b"x", 0, K="v" * 40000)
    assert store.put(big_props).result.status == PutStatus.PROPERTIES_SIZE_EXCEEDED
    assert store.max_offset("T", 0) == 0


def test_arrival_listeners_see_each_message_once_it_is_readable(open_store) -> None:
    store = open_store()
    seen = []

    def listener(arrival) -> None:
        seen.append(arrival)
        assert store.get_message("g", arrival.topic, arrival.queue_id, arrival.queue_offset, 1).messages

    store.add_arrival_listener(listener)
    store.put(msg("T", b"x", 3, TAGS="TagA"))
    store.put_batch([msg("T", b"y", 3), msg("T", b"z", 3)])
    assert [(a.topic, a.queue_id, a.queue_offset) for a in seen] == [("T", 3, 0), ("T", 3, 1), ("T", 3, 2)]
    assert seen[0].tags_code == 2598919 and seen[1].tags_code == 0


def test_sync_flush_acknowledges_and_exposes_only_after_fsync(open_store) -> None:
    store = open_store(dataclasses.replace(SMALL, flush_disk_type=FLUSH_SYNC, flush_interval_commit_log_ms=10_000))
    arrivals = []
    store.add_arrival_listener(arrivals.append)
    tickets = [store.put(msg("T", f"s{i}".encode())) for i in range(64)]
    # Not yet fsynced: nothing acknowledged, nothing readable (the put itself wakes the flusher,
    # but its completion only runs when the owner thread runs it).
    assert not any(t.done for t in tickets) and store.max_offset("T", 0) == 0 and not arrivals
    done = []
    for t in tickets:
        t.add_done_callback(done.append)
    while len(done) < 64:
        assert store.completions.run_pending(timeout=5) > 0
    assert all(r.status == PutStatus.PUT_OK for r in done)
    assert store.max_offset("T", 0) == 64 and len(arrivals) == 64


def test_sync_flush_group_commit_shares_fsyncs(open_store, monkeypatch) -> None:
    import rmqproxy.broker.store.mapped as mapped

    calls = []
    real = os.fdatasync
    monkeypatch.setattr(mapped.os, "fdatasync", lambda fd: (calls.append(fd), real(fd)))
    store = open_store(dataclasses.replace(SMALL, flush_disk_type=FLUSH_SYNC, checkpoint_interval_ms=10_000))
    tickets = [store.put(msg("T", b"g")) for _ in range(200)]
    while not all(t.done for t in tickets):
        store.completions.run_pending(timeout=5)
    assert 1 <= len(calls) < 50  # far fewer fsyncs than puts


def test_put_after_shutdown_is_service_not_available(open_store) -> None:
    store = open_store()
    store.shutdown()
    assert store.put(msg()).result.status == PutStatus.SERVICE_NOT_AVAILABLE


def _disk_bytes(root) -> int:
    return sum(f.stat().st_blocks * 512 for f in root.rglob("*") if f.is_file())


def test_default_segments_take_disk_as_they_fill_not_when_created(open_store, tmp_path) -> None:
    """1 GiB commit-log and 6 MB consume-queue files are sparse: blocks are allocated a step ahead
    of the writer, so a store holding a few messages in 40 queues uses tens of MiB, not GiBs, and
    data written across allocation steps reads back intact."""
    store = open_store(StoreConfig())
    for q in range(40):
        assert store.put(msg(f"T{q % 10}", b"x", q // 10)).result.ok
    assert store.commitlog.files.first.size == 1 << 30
    assert _disk_bytes(tmp_path / "store") < 32 << 20
    big = bytes(range(256)) * 4096  # 1 MiB
    results = [store.put(msg("Big", big)).result for _ in range(40)]  # crosses two 16 MiB steps
    assert all(r.ok for r in results)
    assert 40 << 20 < _disk_bytes(tmp_path / "store") < 96 << 20
    for offset in range(40):  # one per pull: a pull carries at most 256 KiB
        got = store.get_message("g", "Big", 0, offset, 1, None)
        assert [m.body for m in decode_messages(got.body)] == [big]


def test_disk_full_fails_the_put_cleanly_and_keeps_acknowledged_data(tmp_path) -> None:
    """A real allocation failure: the child's file size limit (below one segment) stops the next one."""
    script = textwrap.dedent(
        f"""
        import resource, signal, sys
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        from rmqproxy.broker.store import MessageStore, StoreConfig
        from tests.store.conftest import msg
        cfg = StoreConfig(mapped_file_size_commit_log=64 * 1024, mapped_file_size_consume_queue_entries=64)
        store = MessageStore({str(tmp_path / "s")!r}, cfg)
        store.start()
        assert store.put(msg("T", bytes(9000))).result.ok  # the first segment exists
        resource.setrlimit(resource.RLIMIT_FSIZE, (32 * 1024, 32 * 1024))  # below one segment
        ok = 1
        for i in range(30):
            r = store.put(msg("T", bytes(9000))).result
            if not r.ok:
                print("FAILED", r.status.name, ok, r.remark.split(":")[0])
                break
            ok += 1
        store.shutdown()
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=os.getcwd(), timeout=60,
                         env=child_env())  # fmt: skip
    assert out.returncode == 0, out.stderr
    status, count = out.stdout.split()[1:3]
    assert status == "CREATE_MAPPED_FILE_FAILED" and int(count) == 7  # 7 records fill the first segment
    store = MessageStore(tmp_path / "s", SMALL)
    store.start()
    try:
        got = decode_messages(store.get_message("g", "T", 0, 0, 32).body, check_crc=True)
        assert len(got) == 7 and store.put(msg("T", b"after")).result.ok
    finally:
        store.shutdown()
