"""``MessageStore``: the facade the broker calls; it never imports the network layer.

The facade owns the lifecycle, the put path and dispatch (making a stored record readable). The
rest is in modules of its own: ``queues`` (the consume queues), ``reads`` (pull reads and
lookups), ``flush`` (the flush thread and checkpoints), ``parking`` (delay levels),
``retention`` (expired segments and the disk) and ``recovery``. Invariants:

- Threading: every public method runs on one owner thread (the reactor). The flush thread only
  fsyncs, writes index/checkpoint/offset files, and hands completions back through ``post``
  (``reactor.callFromThread`` in the server; a ``CompletionQueue`` by default, for tests).
- A put assigns the queue offset and writes the record at once. The record becomes readable —
  its consume-queue entry written, arrival listeners called — immediately under ASYNC_FLUSH, and
  only after the fsync that covers it under SYNC_FLUSH (puts waiting together share one fsync:
  group commit); the put's ticket completes at that same moment.
- ``checkpoint.physical`` is a commit-log offset below which every record's consume-queue entry
  and index entries are durable. A crash restart re-dispatches records from there, validating
  each by length and CRC, and truncates at the first torn or corrupt one. A clean stop records
  the end of the log, so the next start scans nothing.
- A full disk refuses puts (SERVICE_NOT_AVAILABLE) until ``check_disk`` finds room; any other
  write error refuses them until a restart. Reads go on either way.
"""

from __future__ import annotations

import collections
import errno
import os
import resource
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from twisted.logger import Logger

from codec import message as _message  # encode_message through it: codec.implementation rebinds it
from codec.errors import MessageError
from codec.javacompat import string_hash
from codec.message import MAGIC_V1, MAGIC_V2, HostPort, Message

from ...core.config import FLUSH_SYNC
from ...core.delay_levels import SCHEDULE_TOPIC, TIMER_TOPIC
from ...core.files import read_json, write_json_atomic
from ...core.hold import Arrival
from .commitlog import CommitLog
from .consumequeue import ConsumeQueue
from .flush import Checkpoint, Flusher, FlushRound
from .index import KeyIndex
from .mapped import Allocate, OpenBudget
from .model import CompletionQueue, GetResult, MessageFilter, PutResult, PutStatus, PutTicket, StoreConfig
from .offsets import ConsumerOffsets
from .parking import DelayParking, unparked
from .puttimes import PutTimes
from .queues import QueueTable
from .reads import Reader
from .recovery import recover
from .retention import DISK_FULL_RATIO, Retention

log = Logger()

_SPACE_ERRORS = (errno.ENOSPC, errno.EDQUOT)


def auto_queue_file_budget() -> int:
    """How many consume-queue segments may be mapped at once when no key says: a quarter of the
    soft fd limit, as each takes two fds (ours, and the duplicate Python's ``mmap`` keeps), leaving
    half to connections, the commit log and the index; at most 16384, so the mappings stay far
    below the kernel's default ``vm.max_map_count`` (65530)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 16384
    return max(16, min(soft // 4, 16384))


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 << 30


class MessageStore:
    """The embedded store (see the module doc). ``start()`` before use, ``shutdown()`` after."""

    def __init__(
        self,
        root: Path | str,
        config: StoreConfig = StoreConfig(),
        *,
        clock: Callable[[], float] = time.time,
        post: Callable[[Callable[[], None]], None] | None = None,
        allocate: Allocate | None = None,
        on_flush: Callable[[float], None] | None = None,
    ) -> None:
        self.root = Path(root)
        self.config = config
        self.clock = clock
        self.completions = post if post is not None else CompletionQueue()
        self._allocate = allocate
        self.on_flush = on_flush  # called from the flush thread with each fsync round's seconds
        self.parking = DelayParking(config.message_delay_level, self.root / "config" / "delayOffset.json")
        self.mapped_queue_files = OpenBudget(config.max_mapped_consume_queue_files or auto_queue_file_budget())
        self.queue_table = QueueTable(
            self.consumequeue_dir, config.mapped_file_size_consume_queue_entries, self.mapped_queue_files,
            self.root / "config" / "droppedQueues.json", allocate,
        )  # fmt: skip
        self._queues = self.queue_table.by_key  # the hot paths index it directly
        self._listeners: list[Callable[[Arrival], None]] = []
        self._next_offset: dict[tuple[str, int], int] = {}
        # SYNC_FLUSH puts waiting for their fsync: ticket, messages, and when the put began (clock seconds)
        self._waiting: collections.deque[tuple[PutTicket, Iterable[Message], float]] = collections.deque()
        self._tag_codes: dict[str, int] = {}
        self._sync = config.flush_disk_type == FLUSH_SYNC
        self.put_count = 0  # messages stored since start
        self.put_failed = 0  # puts refused since start (the runtime info's putMessageFailedTimes)
        self.put_times = PutTimes(clock)  # how long puts take (putMessageDistributeTime, putLatency99...)
        self._start_pos = 0  # the commit log's end at start (``put_bytes`` counts from there)
        self._dispatched = 0
        self._dirty_cq: set = set()
        self._io_error: OSError | None = None  # the commit log failed: not writable until a restart
        self.disk_full: str | None = None  # why puts wait for room; ``check_disk`` clears it
        self._not_writable: str | None = None  # either of the two, as a put's remark
        self._memory_limit = _physical_memory() * config.access_message_in_memory_max_ratio // 100
        self._started = False
        self._closed = False
        self.recovered_records = 0
        self.listener_failures = 0  # arrival listeners that raised (logged; the put stands)

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Load everything; recover after a crash; start the flush thread."""
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "config").mkdir(exist_ok=True)
        self.commitlog = CommitLog(self.commitlog_dir, self.config.mapped_file_size_commit_log, self._allocate)
        self.index = KeyIndex(self.root / "index", self.config.mapped_file_size_commit_log)
        self.offsets = ConsumerOffsets(self.root / "config" / "consumerOffset.json")
        self.parking.load()
        self.queue_table.load()
        self.reads = Reader(self.queue_table, self.commitlog, self.index, self.config, self._memory_limit)
        self.retention = Retention(self.root, self.commitlog, self.index, self.queue_table, self.config, self.clock)
        checkpoint = read_json(self.root / "checkpoint", {})
        abort = self.root / "abort"
        if abort.exists() or "end" not in checkpoint:
            self.recovered_records = recover(
                self.commitlog, self.queue_table, self.index, int(checkpoint.get("physical", 0)),
                check_crc=self.config.check_crc_on_recover, tags_code=self._tags_code,
            )  # fmt: skip
        else:
            self.commitlog.write_pos = max(int(checkpoint["end"]), self.commitlog.min_offset)
        self._dispatched = self._start_pos = self.commitlog.write_pos
        self.queue_table.correct_min(self.commitlog.min_offset)
        for key, cq in self._queues.items():
            self._next_offset[key] = cq.max_offset
        write_json_atomic(self.root / "checkpoint", {"physical": self._dispatched})
        self.queue_table.forget_dropped()  # nothing below the checkpoint just written is dispatched again
        abort.touch()
        self._started = True
        self.commitlog.start_prefaulting()
        self.flusher = Flusher(
            self.root, self.commitlog, self.queue_table, self.index, self.offsets, self.parking, self.config,
            post=self.completions, snapshot=self._snapshot, on_round=self._on_flushed, on_fsync=self.on_flush,
        )  # fmt: skip
        self.flusher.start(self.commitlog.write_pos)

    def shutdown(self) -> None:
        """Flush everything, answer waiting puts, record a clean stop and close the files."""
        if not self._started:
            return
        self._started = False
        self.flusher.stop()
        self._on_flushed(self.flusher.round(checkpoint=False, on_owner=True))  # completes every waiting put
        final = self.flusher.round(checkpoint=True, on_owner=True)
        try:
            if final.log_error is not None or final.aux_error is not None:
                raise final.log_error or final.aux_error
            self.offsets.persist(force=True)
            write_json_atomic(self.root / "checkpoint", {"physical": self._dispatched, "end": self.commitlog.write_pos})
            (self.root / "abort").unlink(missing_ok=True)
        except OSError as exc:  # e.g. a full disk: keep ``abort``, so the next start recovers from the log
            log.error("store: the clean-stop records could not be written ({error}); the next start will "
                      "recover from the commit log", error=exc)  # fmt: skip
        self._closed = True
        self.commitlog.close()
        self.queue_table.close()

    def add_arrival_listener(self, fn: Callable[[Arrival], None]) -> None:
        """``fn(arrival)`` runs on the owner thread for each message right after it is readable."""
        self._listeners.append(fn)

    # --- put ------------------------------------------------------------------------------

    def put(self, msg: Message) -> PutTicket:
        """Store one message (fills in its store fields and offsets). The hot path: kept flat,
        sharing its checks with ``put_batch`` through ``_refused``, ``_stamp`` and ``_queue_for``."""
        if self._not_writable is not None or not self._started:
            return self._refused()
        began = self.clock()
        refused = self._stamp(msg, int(began * 1000), self.config.store_host)
        if refused is not None:
            return refused
        key = (msg.topic, msg.queue_id)
        cq = self._queues.get(key) or self._queue_for(key)
        if cq.__class__ is PutTicket:
            return cq
        offset = self._next_offset.get(key)
        if offset is None:
            offset = cq.max_offset
        msg.queue_offset = offset
        try:
            record = _message.encode_message(msg)
        except MessageError as exc:
            return self._failed(_encode_failure(exc), exc.what)
        size = len(record)
        if not self.commitlog.fits(size):
            return self._failed(PutStatus.MESSAGE_ILLEGAL, "record larger than a commit-log segment")
        try:
            cq.ensure(offset, offset)
            msg.physical_offset = self.commitlog.append(record)
        except OSError as exc:
            return self._allocation_failed(exc)
        msg.store_size = size
        self._next_offset[key] = offset + 1
        self.put_count += 1
        ticket = PutTicket(PutResult(PutStatus.PUT_OK, [msg], msg.store_host), self.commitlog.write_pos)
        if self._sync:
            self._waiting.append((ticket, (msg,), began))
            self.flusher.wake()
        else:
            self.put_times.took(began)
            self._dispatch_one(msg, cq)
            ticket.done = True
        return ticket

    def put_batch(self, msgs: list[Message] | tuple[Message, ...]) -> PutTicket:
        """Store messages of one topic and queue at consecutive queue offsets (one ticket)."""
        if self._not_writable is not None or not self._started:
            return self._refused()
        began = self.clock()
        now = int(began * 1000)
        host = self.config.store_host
        for msg in msgs:
            refused = self._stamp(msg, now, host)
            if refused is not None:
                return refused
        key = (msgs[0].topic, msgs[0].queue_id)
        cq = self._queues.get(key) or self._queue_for(key)
        if cq.__class__ is PutTicket:
            return cq
        offset = self._next_offset.get(key, cq.max_offset)
        records = []
        try:
            cq.ensure(offset, offset + len(msgs) - 1)
            for msg in msgs:
                msg.queue_offset = offset
                offset += 1
                try:
                    record = _message.encode_message(msg)
                except MessageError as exc:
                    return self._failed(_encode_failure(exc), exc.what)
                if not self.commitlog.fits(len(record)):
                    return self._failed(PutStatus.MESSAGE_ILLEGAL, "record larger than a commit-log segment")
                records.append(record)
            if len(records) > 1:
                self.commitlog.reserve([len(r) for r in records])
            append = self.commitlog.append
            for msg, record in zip(msgs, records):  # noqa: B905 (same length by construction)
                msg.physical_offset = append(record)
                msg.store_size = len(record)
        except OSError as exc:
            return self._allocation_failed(exc)
        self._next_offset[key] = offset
        self.put_count += len(msgs)
        ticket = PutTicket(PutResult(PutStatus.PUT_OK, list(msgs), host), self.commitlog.write_pos)
        if self._sync:
            self._waiting.append((ticket, msgs, began))
            self.flusher.wake()
        else:
            self.put_times.took(began)
            self._dispatch(msgs)
            ticket.done = True
        return ticket

    def _refused(self) -> PutTicket:
        """The failed ticket of a put while the store takes none (full disk, write error, not
        started): callers test ``_not_writable`` and ``_started`` first, on the hot path."""
        return self._failed(PutStatus.SERVICE_NOT_AVAILABLE, self._not_writable or "the store is not running")

    def _stamp(self, msg: Message, now_ms: int, host: HostPort) -> PutTicket | None:
        """Check ``msg``'s size and give it its store fields (parking it if delayed); a failed
        ticket if it is refused."""
        limit = self.config.max_message_size
        if len(msg.body) > limit:
            return self._failed(PutStatus.MESSAGE_ILLEGAL, f"message body of {len(msg.body)} bytes exceeds {limit}")
        if "DELAY" in msg.properties:
            self.parking.park(msg)
        msg.store_timestamp = now_ms
        msg.store_host = host
        msg.body_crc = None
        if len(msg.topic) > 42:  # only long topics can exceed 127 UTF-8 bytes
            msg.magic = MAGIC_V1 if len(msg.topic.encode()) <= 127 else MAGIC_V2
        return None

    def _queue_for(self, key: tuple[str, int]) -> ConsumeQueue | PutTicket:
        """The consume queue of a put, created now, or a failed ticket for a refused name."""
        try:
            return self.queue_table.open(*key)
        except ValueError as exc:
            return self._failed(PutStatus.MESSAGE_ILLEGAL, str(exc))

    def _allocation_failed(self, exc: OSError) -> PutTicket:
        """A put found no disk blocks: a full disk refuses puts until ``check_disk`` finds room
        (SERVICE_NOT_AVAILABLE, which a producer retries elsewhere); any other error is
        CREATE_MAPPED_FILE_FAILED for this put only."""
        if exc.errno in _SPACE_ERRORS:
            self._set_disk_full(f"the broker's disk is full ({exc.strerror})")
            return self._failed(PutStatus.SERVICE_NOT_AVAILABLE, self._not_writable or "")
        return self._failed(PutStatus.CREATE_MAPPED_FILE_FAILED, f"cannot allocate a store file: {exc}")

    def _set_disk_full(self, why: str) -> None:
        if self.disk_full is None:
            log.warn("store: {why}; sends are refused until there is room, pulls go on", why=why)
        self.disk_full = why
        self._update_writable()

    def _update_writable(self) -> None:
        if self._io_error is not None:
            self._not_writable = f"the store cannot write: {self._io_error}; restart after fixing the disk"
        elif self.disk_full is not None:
            self._not_writable = f"{self.disk_full}; sends resume by themselves once there is room"
        else:
            self._not_writable = None

    def check_disk(self) -> float:
        """Owner thread, periodically: the used share of the store's file system (expired
        segments deleted early past ``disk_max_used_space_ratio``). Above ``DISK_FULL_RATIO`` puts
        are refused; below it a disk found full takes puts again."""
        ratio = self.retention.used_share()
        if ratio > DISK_FULL_RATIO:
            self._set_disk_full(f"the broker's disk is full [{ratio:.1%} used]")
        elif self.disk_full is not None:
            log.info("store: the disk has room again ({ratio:.1%} used): sends are taken again", ratio=ratio)
            self.disk_full = None
            self._update_writable()
        return ratio

    def _failed(self, status: PutStatus, remark: str) -> PutTicket:
        self.put_failed += 1
        ticket = PutTicket(PutResult(status, remark=remark, store_host=self.config.store_host))
        ticket._complete()
        return ticket

    def _tags_code(self, msg: Message) -> int:
        """The consume-queue tags code: the tag's hash, or a parked message's delivery time."""
        if msg.topic == SCHEDULE_TOPIC:
            return self.parking.deliver_time(msg)
        if msg.topic == TIMER_TOPIC:
            due = msg.properties.get("TIMER_OUT_MS", "")
            return int(due) if due.isdigit() else 0
        tags = msg.properties.get("TAGS")
        return (self._tag_codes.get(tags) or self._tag_code(tags)) if tags else 0

    def _tag_code(self, tags: str) -> int:
        code = string_hash(tags)
        if len(self._tag_codes) < 65536:  # tags repeat; bounded against unbounded tag sets
            self._tag_codes[tags] = code
        return code

    def _dispatch(self, msgs: Iterable[Message]) -> None:
        """Make stored messages readable: consume-queue entry and index entries, then arrival
        listeners. Owner thread only (the flusher gets snapshots through ``_snapshot``)."""
        queues = self._queues
        for msg in msgs:
            self._dispatch_one(msg, queues.get((msg.topic, msg.queue_id)) or self.queue_table.open(msg.topic, msg.queue_id))

    def _dispatch_one(self, msg: Message, cq: ConsumeQueue) -> None:
        """``_dispatch`` of one message whose consume queue the caller already holds."""
        topic = msg.topic
        props = msg.properties
        tags_code = self._tags_code(msg)
        phys = msg.physical_offset
        self._dirty_cq.add(cq.put(msg.queue_offset, phys, msg.store_size, tags_code))
        keys = props.get("KEYS")
        uniq = props.get("UNIQ_KEY")
        if keys or uniq:
            self.index.add_message(topic, keys, uniq, phys)
        self._dispatched = phys + msg.store_size
        if self._listeners:
            arrival = Arrival(topic, msg.queue_id, msg.queue_offset, tags_code, msg.store_timestamp, props)
            for fn in self._listeners:
                try:
                    fn(arrival)
                except Exception:  # the message is stored: a listener's failure must not fail its put
                    self.listener_failures += 1
                    log.failure("store: an arrival listener failed on {topic}:{queue}", topic=topic, queue=msg.queue_id)

    def _snapshot(self) -> Checkpoint | None:
        """Owner thread: what the next checkpoint covers (``flush.Checkpoint``); None once closed."""
        if self._closed:
            return None
        dirty, self._dirty_cq = self._dirty_cq, set()
        return self._dispatched, dirty, self.index.take_pending()

    def _on_flushed(self, flushed: FlushRound) -> None:
        """Owner thread: complete and dispatch SYNC_FLUSH puts the fsync covered; note a failed
        write (a full disk refuses puts until there is room, anything else until a restart) and
        keep what it left unwritten for the next round."""
        if self._closed:
            return
        for error in (flushed.log_error, flushed.aux_error):
            if error is None:
                continue
            if error.errno in _SPACE_ERRORS:
                self._set_disk_full(f"the broker's disk is full ({error.strerror})")
            elif self._io_error is None:
                log.error("store: a write failed ({error}): sends are refused until a restart", error=error)
                self._io_error = error
                self._update_writable()
        if flushed.unwritten_index:
            self.index.restore(flushed.unwritten_index)
        self._dirty_cq |= flushed.unflushed_queues
        status = PutStatus.FLUSH_DISK_TIMEOUT if flushed.log_error is not None else None
        while self._waiting and self._waiting[0][0].end <= flushed.target:
            ticket, msgs, began = self._waiting.popleft()
            self.put_times.took(began)
            self._dispatch(msgs)
            ticket._complete(status)

    # --- delay levels ---------------------------------------------------------------------

    def deliver_due(self, now_ms: int | None = None) -> int | None:
        """Re-put parked messages whose delay has passed to their real topic; return the epoch ms
        of the next delivery due, or None when nothing waits."""
        now_ms = int(self.clock() * 1000) if now_ms is None else now_ms
        return self.parking.deliver_due(self.queue_table, now_ms, self.reads.look_message, self.put)

    def unpark(self, parked: Message, drop: tuple[str, ...] = ("DELAY",), add: dict[str, str] | None = None) -> PutTicket | None:
        """Put a parked message (delay level or timer) into its real topic and queue, without the
        ``drop`` properties and with ``add``; None if it names no real topic."""
        msg = unparked(parked, drop, add)
        return self.put(msg) if msg is not None else None

    def delay_progress(self) -> dict[int, tuple[int, int]]:
        """Per delay level (from 1) whose delivery has begun: next offset to deliver, queue end."""
        return self.parking.progress(self.queue_table)

    # --- cleaning (mqadmin cleanExpiredCQ, cleanUnusedTopic) --------------------------------

    def destroy_queue(self, topic: str, queue_id: int) -> bool:
        """Delete a consume queue, files and folder: its offsets start again at 0 if it is written
        again. Its records stay in the commit log until retention deletes them, but are never
        dispatched into it again, a crash recovery included. False, and nothing done, while a
        SYNC_FLUSH put to it waits for its fsync. OSError if the record of it cannot be saved."""
        key = (topic, queue_id)
        if key not in self._queues:
            return True
        if any(m.topic == topic and m.queue_id == queue_id for _, msgs, _ in self._waiting for m in msgs):
            return False
        segments = self.queue_table.destroy(topic, queue_id, self.commitlog.write_pos)
        self._next_offset.pop(key, None)
        self._dirty_cq.difference_update(segments)
        return True

    def correct_min_offsets(self) -> None:
        """Move every queue's min offset past entries whose records retention deleted, and delete
        consume-queue files holding only such entries (``delete_expired`` does it after a deletion)."""
        self.queue_table.correct_min(self.commitlog.min_offset)

    # --- reads, lookups and figures (delegated; see ``reads``, ``queues``, ``retention``) ---

    def get_message(self, group: str, topic: str, queue_id: int, offset: int, max_msgs: int,
                    message_filter: MessageFilter | None = None, max_bytes: int | None = None) -> GetResult:  # fmt: skip
        """A pull's read (``Reader.get_message``)."""
        return self.reads.get_message(group, topic, queue_id, offset, max_msgs, message_filter, max_bytes)

    @property
    def get_count(self) -> int:
        """Messages returned by reads since start."""
        return self.reads.count

    def read_record(self, phys: int) -> bytes | None:
        return self.reads.read_record(phys)

    def look_message(self, phys: int) -> Message | None:
        return self.reads.look_message(phys)

    def message_at(self, topic: str, queue_id: int, offset: int) -> Message | None:
        return self.reads.message_at(topic, queue_id, offset)

    def in_disk(self, topic: str, queue_id: int, offset: int) -> bool:
        return self.reads.in_disk(topic, queue_id, offset)

    def earliest_message_time(self, topic: str, queue_id: int) -> int | None:
        return self.reads.earliest_message_time(topic, queue_id)

    def search_offset_by_timestamp(self, topic: str, queue_id: int, timestamp: int) -> int:
        return self.reads.search_offset_by_timestamp(topic, queue_id, timestamp)

    def query_by_key(self, topic: str, key: str, max_num: int, begin_ms: int = 0, end_ms: int = 2**62) -> list[bytes]:
        """Records of ``topic`` whose KEYS or UNIQ_KEY contain ``key``, newest first."""
        return self.reads.messages_by_keys(topic, [key], max_num, begin_ms, end_ms).get(key, [])

    def messages_by_keys(self, topic: str, keys: Iterable[str], max_num: int, begin_ms: int = 0,
                         end_ms: int = 2**62) -> dict[str, list[bytes]]:  # fmt: skip
        return self.reads.messages_by_keys(topic, keys, max_num, begin_ms, end_ms)

    def queues(self) -> list[tuple[str, int]]:
        return self.queue_table.keys()

    def min_offset(self, topic: str, queue_id: int) -> int:
        return self.queue_table.min_offset(topic, queue_id)

    def max_offset(self, topic: str, queue_id: int) -> int:
        """Next queue offset to be readable (``getMaxOffsetInQueue``)."""
        return self.queue_table.max_offset(topic, queue_id)

    def queue_entries(self, topic: str, queue_id: int, start: int, max_entries: int) -> list[tuple[int, int, int]]:
        return self.queue_table.entries(topic, queue_id, start, max_entries)

    def tags_codes(self, topic: str, queue_id: int, start: int) -> Iterator[tuple[int, int]]:
        return self.queue_table.tags_codes(topic, queue_id, start)

    def queue_is_empty(self, topic: str, queue_id: int) -> bool:
        return self.queue_table.is_empty(topic, queue_id)

    def delete_expired(self, now_ms: int | None = None) -> int:
        return self.retention.delete_expired(now_ms)

    def disk_ratio(self) -> float:
        return self.retention.disk_ratio()

    def disk_space(self) -> tuple[int, int]:
        return self.retention.disk_space()

    def consumer_lag(self) -> list[tuple[str, str, int, int]]:
        """(topic, group, lag, in flight) per consumed topic, from committed and pulled offsets;
        a negative commit counts as none, as in consume stats."""
        totals: dict[tuple[str, str], list[int]] = {}
        for group, topic, queue_id in self.offsets.table():
            committed, pulled = self.offsets.progress(group, topic, queue_id)
            entry = totals.setdefault((topic, group), [0, 0])
            entry[0] += max(0, self.max_offset(topic, queue_id) - committed)
            entry[1] += pulled - committed
        return [(topic, group, lag, inflight) for (topic, group), (lag, inflight) in totals.items()]

    def release_idle_files(self) -> int:
        """Release the mappings and fds of consume-queue segments unused since the last call
        (they map again on their next use); returns how many. Call it every minute or so."""
        return self.mapped_queue_files.release_idle()

    @property
    def commitlog_dir(self) -> Path:
        return self.root / "commitlog"

    @property
    def consumequeue_dir(self) -> Path:
        return self.root / "consumequeue"

    @property
    def min_physical_offset(self) -> int:
        return self.commitlog.min_offset

    @property
    def max_physical_offset(self) -> int:
        return self.commitlog.max_offset

    @property
    def dispatch_behind_bytes(self) -> int:
        """Commit-log bytes written but not yet readable (SYNC_FLUSH puts waiting for their flush)."""
        return max(0, self.commitlog.write_pos - self._dispatched)

    @property
    def put_bytes(self) -> int:
        """Record bytes stored since start (``putMessageSizeTotal``): the commit log's growth less
        the blanks that end its segments, so that a put pays nothing for it."""
        return self.commitlog.write_pos - self._start_pos - self.commitlog.blank_bytes

    @property
    def unflushed_bytes(self) -> int:
        """Commit-log bytes written and not yet fsynced (``remainHowManyDataToFlush``)."""
        return max(0, self.commitlog.write_pos - self.flusher.flushed)


def _encode_failure(exc: MessageError) -> PutStatus:
    return PutStatus.PROPERTIES_SIZE_EXCEEDED if "properties" in exc.what else PutStatus.MESSAGE_ILLEGAL
