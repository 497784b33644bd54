"""The flush thread: fsyncs the commit log every ``flush_interval_commit_log_ms`` (at once when a
SYNC_FLUSH put wakes it) and, every ``checkpoint_interval_ms``, makes the rest durable: consume
queues, key index, consumer offsets, delay progress, then the checkpoint that says recovery may
start past all of it.

The thread only writes files. What each round made durable, and what failed, goes back to the
owner thread through ``post`` as a ``FlushRound``; what a checkpoint covers is taken on the owner
thread too (``snapshot``), since only it changes the tables. A failed round hands back what it
did not write, to be tried again."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from ...core.files import write_json_atomic
from .commitlog import CommitLog
from .index import KeyIndex
from .model import StoreConfig
from .offsets import ConsumerOffsets
from .parking import DelayParking
from .queues import QueueTable

#: What a checkpoint covers: the dispatched commit-log position, the consume-queue files written
#: since the last one, and the buffered index entries.
Checkpoint = tuple[int, set, dict]


class FlushRound(NamedTuple):
    """What a flush round made durable, and what it did not."""

    target: int  # the commit log is durable up to here (unless ``log_error``)
    log_error: OSError | None = None  # the commit log's fsync failed
    aux_error: OSError | None = None  # a checkpoint-side write failed (queues, index, offsets, checkpoint)
    unwritten_index: dict | None = None  # index entries to buffer again
    unflushed_queues: frozenset | set = frozenset()  # consume-queue files to fsync again


class Flusher:
    """One store's flush thread and the position it has made durable (``flushed``)."""

    def __init__(
        self,
        root: Path,
        commitlog: CommitLog,
        queues: QueueTable,
        index: KeyIndex,
        offsets: ConsumerOffsets,
        parking: DelayParking,
        config: StoreConfig,
        *,
        post: Callable[[Callable[[], None]], None],
        snapshot: Callable[[], Checkpoint | None],
        on_round: Callable[[FlushRound], None],
        on_fsync: Callable[[float], None] | None,
    ) -> None:
        self.checkpoint_path = root / "checkpoint"
        self.commitlog = commitlog
        self.queues = queues
        self.index = index
        self.offsets = offsets
        self.parking = parking
        self.config = config
        self.post = post
        self.snapshot = snapshot
        self.on_round = on_round
        self.on_fsync = on_fsync  # each commit-log fsync round's seconds (a metric), from the thread
        self.flushed = 0  # the commit log is durable below this
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, position: int) -> None:
        """Start the thread; the log is durable up to ``position``."""
        self.flushed = position
        self._thread = threading.Thread(target=self._loop, name="rmqproxy-store-flush", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """A SYNC_FLUSH put waits: flush now rather than at the next interval."""
        self._wake.set()

    def stop(self) -> None:
        """Stop the thread and wait for its round to end (the owner then runs the final ones)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()

    def _loop(self) -> None:
        interval = self.config.flush_interval_commit_log_ms / 1000
        last_checkpoint = time.monotonic()
        while not self._stop.is_set():
            self._wake.wait(interval)
            self._wake.clear()
            if self._stop.is_set():
                break
            due = time.monotonic() - last_checkpoint >= self.config.checkpoint_interval_ms / 1000
            flushed = self.round(checkpoint=due)
            self.post(lambda f=flushed: self.on_round(f))
            if due:
                last_checkpoint = time.monotonic()

    def round(self, *, checkpoint: bool, on_owner: bool = False) -> FlushRound:
        """fsync the commit log up to the written end; with ``checkpoint``, also make consume
        queues, index, offsets and delay progress durable and move the checkpoint. Runs on the
        thread, or on the owner (``on_owner``) at shutdown."""
        snapshot = None
        if checkpoint:
            snapshot = self.snapshot() if on_owner else self._snapshot_from_owner()
        dispatched, dirty, pending = snapshot if snapshot is not None else (0, set(), {})
        commitlog = self.commitlog
        target = commitlog.write_pos
        try:
            start = self.flushed - self.flushed % commitlog.segment_size
            began = time.perf_counter()
            dirty_log = commitlog.dirty_segments(start, target) if target > self.flushed else []
            for segment in dirty_log:
                segment.fsync()
            commitlog.files.sync_directory()
            if dirty_log and self.on_fsync is not None:
                self.on_fsync(time.perf_counter() - began)
            self.flushed = target
        except OSError as exc:
            return FlushRound(target, exc, None, pending, dirty)
        if snapshot is None:
            return FlushRound(target)
        try:
            for segment in dirty:
                segment.fsync()
            self.queues.sync_directories()
            self.index.write(pending)
            write_json_atomic(self.checkpoint_path, {"physical": dispatched})
            self.offsets.persist()
            self.parking.save()
        except OSError as exc:
            return FlushRound(target, None, exc, pending, dirty)
        return FlushRound(target)

    def _snapshot_from_owner(self) -> Checkpoint | None:
        """Ask the owner thread (through ``post``) for a checkpoint snapshot; None if it does not
        answer within a flush interval (the checkpoint then waits for the next round)."""
        box: list = []
        ready = threading.Event()

        def take() -> None:
            snapshot = self.snapshot()
            if snapshot is not None:
                box.append(snapshot)
            ready.set()

        self.post(take)
        ready.wait(max(self.config.flush_interval_commit_log_ms, 100) / 1000)
        return box[0] if box else None
