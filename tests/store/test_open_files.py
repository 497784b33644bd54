"""Consume-queue files under a budget (issue 24): however many queues exist, only so many of
their segments hold an fd and a mapping; the rest are released and map again on use, without
losing a message or the durability of one written before its segment was released."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from rmqproxy.broker.store.mapped import OpenBudget, Segment, _allocate

from .conftest import SMALL, crash, msg
from .test_recovery import all_bodies

QUEUES = 40
BUDGET = dataclasses.replace(SMALL, max_mapped_consume_queue_files=6)


def _open_fds_under(root: Path) -> int:
    """How many of this process's fds point into ``root``'s consume queues (Linux ``/proc``):
    two per mapped segment, as Python's ``mmap`` keeps a duplicate of the one it maps."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        count += target.startswith(str(root / "consumequeue"))
    return count


def _fill(store, queues: int = QUEUES) -> None:
    for q in range(queues):
        for i in range(3):
            store.put(msg(f"T{q}", f"{q}-{i}".encode()))


def test_many_queues_map_no_more_files_than_the_budget(open_store, tmp_path: Path) -> None:
    store = open_store(BUDGET)
    _fill(store)
    assert len(store.mapped_queue_files) <= 6
    assert _open_fds_under(tmp_path / "store") <= 2 * 6
    for q in range(QUEUES):  # every queue reads back, mapping its file again as it goes
        assert all_bodies(store, f"T{q}") == [f"{q}-{i}".encode() for i in range(3)]
        assert _open_fds_under(tmp_path / "store") <= 2 * 6
    assert store.put(msg("T0", b"more")).result.first_queue_offset == 3  # appends reopen too


def test_a_restart_opens_no_more_than_the_budget_and_keeps_every_queue(open_store, tmp_path: Path) -> None:
    store = open_store(BUDGET)
    _fill(store)
    store.shutdown()
    again = open_store(BUDGET)
    assert _open_fds_under(tmp_path / "store") <= 2 * 6
    assert [again.max_offset(f"T{q}", 0) for q in range(QUEUES)] == [3] * QUEUES
    assert all_bodies(again, "T17") == [b"17-0", b"17-1", b"17-2"]


def test_recovery_after_a_crash_walks_every_queue_within_the_budget(open_store, tmp_path: Path) -> None:
    config = dataclasses.replace(BUDGET, checkpoint_interval_ms=60_000)
    store = open_store(config)
    _fill(store)
    crash(store)
    again = open_store(config)
    assert again.recovered_records == 3 * QUEUES
    assert _open_fds_under(tmp_path / "store") <= 2 * 6
    assert all(all_bodies(again, f"T{q}") == [f"{q}-{i}".encode() for i in range(3)] for q in range(QUEUES))


def test_idle_segments_are_released_and_busy_ones_kept(open_store) -> None:
    store = open_store(dataclasses.replace(SMALL, max_mapped_consume_queue_files=100))
    _fill(store, 5)
    assert len(store.mapped_queue_files) == 5
    store.release_idle_files()  # clears the marks of the last minute's use
    store.put(msg("T3", b"busy"))
    assert store.release_idle_files() == 4
    assert len(store.mapped_queue_files) == 1
    assert all_bodies(store, "T1") == [b"1-0", b"1-1", b"1-2"]
    assert len(store.mapped_queue_files) == 2


def test_a_released_segment_is_still_fsynced_through_its_path(tmp_path: Path, monkeypatch) -> None:
    """Its dirty pages outlive the mapping: the flusher's fsync must still reach its file."""
    budget = OpenBudget(2)
    segment = Segment(tmp_path / "seg", 0, 1 << 16, create=True, allocate=_allocate, budget=budget)
    segment.mm[:5] = b"dirty"
    segment.release()
    synced: list[int] = []
    real = os.fdatasync

    def recording(fd: int) -> None:
        synced.append(os.fstat(fd).st_ino)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", recording)
    segment.fsync()
    assert synced == [os.stat(tmp_path / "seg").st_ino]
    assert len(budget) == 0
    assert bytes(segment.mm[:5]) == b"dirty" and len(budget) == 1  # mapped again on use
    segment.close()
    assert len(budget) == 0


def test_the_budget_releases_the_segment_unused_longest() -> None:
    released: list[str] = []

    class Fake:
        def __init__(self, name: str) -> None:
            self.name, self.used = name, True

        def release(self) -> None:
            released.append(self.name)

    budget = OpenBudget(2)
    a, b, c, d = (Fake(n) for n in "abcd")
    budget.mapped(a)
    budget.mapped(b)
    a.used = b.used = False
    b.used = True  # b was used since: a goes first
    budget.mapped(c)
    assert released == ["a"]
    budget.mapped(d)  # b and c both marked: each loses its mark once, then the oldest goes
    assert released == ["a", "b"]
