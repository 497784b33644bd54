"""Destroying consume queues (cleanExpiredCQ, cleanUnusedTopic): files and folder go, other
queues and the commit log stay, and neither a clean restart nor a crash recovery brings the
destroyed queue back."""

from __future__ import annotations

import dataclasses

from rmqproxy.broker.store import FLUSH_SYNC, GetStatus

from .conftest import SMALL, crash, msg

NO_CHECKPOINT = dataclasses.replace(SMALL, checkpoint_interval_ms=60_000)


def test_destroy_removes_the_queue_and_its_folder_only(open_store, tmp_path) -> None:
    store = open_store()
    for i in range(100):
        store.put(msg("Gone", b"g%d" % i, i % 2))
        store.put(msg("Kept", b"k%d" % i))
    phys = store.message_at("Gone", 0, 0).physical_offset
    assert store.destroy_queue("Gone", 0) and store.destroy_queue("Gone", 1)
    root = tmp_path / "store" / "consumequeue"
    assert not (root / "Gone").exists() and (root / "Kept" / "0").is_dir()
    assert ("Gone", 0) not in store.queues() and store.max_offset("Gone", 0) == 0
    assert store.get_message("g", "Gone", 0, 0, 32).status == GetStatus.NO_MATCHED_LOGIC_QUEUE
    assert store.max_offset("Kept", 0) == 100
    assert store.look_message(phys).body == b"g0"  # the commit log keeps the record until retention
    assert store.destroy_queue("Gone", 0)  # already gone: nothing to do


def test_a_destroyed_queue_stays_gone_over_a_clean_restart(open_store) -> None:
    store = open_store()
    for i in range(10):
        store.put(msg("Gone", b"g"))
        store.put(msg("Kept", b"k"))
    store.destroy_queue("Gone", 0)
    store.shutdown()
    again = open_store()
    assert again.queues() == [("Kept", 0)]
    assert again.max_offset("Kept", 0) == 10


def test_crash_recovery_does_not_dispatch_a_destroyed_queue_again(open_store, tmp_path) -> None:
    store = open_store(NO_CHECKPOINT)
    for i in range(30):
        store.put(msg("Gone", b"g%d" % i))
        store.put(msg("Gone", b"g%d" % i, 1))
        store.put(msg("Kept", b"k%d" % i))
    store.destroy_queue("Gone", 0)
    store.destroy_queue("Gone", 1)  # the record is written twice: a backup of it exists too
    store.put(msg("Gone", b"recreated"))  # written again after the destroy: starts at 0, and stays
    store.put(msg("Kept", b"last"))
    crash(store)
    again = open_store(NO_CHECKPOINT)
    assert again.recovered_records > 0
    assert (again.max_offset("Gone", 0), again.max_offset("Gone", 1)) == (1, 0)
    assert again.message_at("Gone", 0, 0).body == b"recreated"
    assert again.max_offset("Kept", 0) == 31
    config = tmp_path / "store" / "config"
    assert not (config / "droppedQueues.json").exists() and not (config / "droppedQueues.json.bak").exists()
    crash(again)
    third = open_store(NO_CHECKPOINT)
    assert (third.max_offset("Gone", 0), third.max_offset("Kept", 0)) == (1, 31)


def test_a_queue_with_a_put_waiting_for_its_fsync_is_not_destroyed(open_store) -> None:
    store = open_store(dataclasses.replace(SMALL, flush_disk_type=FLUSH_SYNC, flush_interval_commit_log_ms=60_000))
    ticket = store.put(msg("T", b"waiting"))
    assert not ticket.done
    assert store.destroy_queue("T", 0) is False
    assert ("T", 0) in store.queues()


def test_correct_min_offsets_drops_consume_queue_files_of_expired_records(open_store, clock, tmp_path) -> None:
    store = open_store(dataclasses.replace(SMALL, file_reserved_time_hours=1))
    for _ in range(200):  # 64 entries per consume-queue file: four files, the first ones expire
        store.put(msg("T", bytes(2_000)))
    clock.now += 2 * 3600
    store.put(msg("T", b"fresh"))
    store.delete_expired()
    files_before = sorted((tmp_path / "store" / "consumequeue" / "T" / "0").iterdir())
    low = store.min_offset("T", 0)
    assert low > 64
    store.correct_min_offsets()  # idempotent after retention: nothing readable goes
    assert sorted((tmp_path / "store" / "consumequeue" / "T" / "0").iterdir()) == files_before
    assert store.min_offset("T", 0) == low
    assert store.get_message("g", "T", 0, low, 32).status == GetStatus.FOUND
    assert store.queue_is_empty("T", 0) is False
