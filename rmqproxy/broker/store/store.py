"""``MessageStore``: the facade the broker calls; it never imports the network layer.

Owns a commit log, one consume queue per (topic, queue id), consumer offsets, a key index, delay
levels, retention, a flush thread and crash recovery. Invariants:

- Threading: every public method runs on one owner thread (the reactor). A flush thread only
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
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import errno
import os
import queue
import resource
import shutil
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import NamedTuple, Protocol

from twisted.logger import Logger

from codec.errors import MessageError
from codec.javacompat import string_hash
from codec.message import (
    MAGIC_V1,
    MAGIC_V2,
    STORE_TIMESTAMP_END_V6,
    STOREHOST_V6_FLAG,
    HostPort,
    Message,
    create_offset_msg_id,
    decode_message,
    encode_message,
    record_store_timestamp,
)

from ...core.config import FLUSH_ASYNC, FLUSH_SYNC, Config
from ...core.delay_levels import DEFAULT_LEVELS, SCHEDULE_TOPIC, TIMER_TOPIC, parse_levels
from ...core.files import backup_of, read_json, write_json_atomic
from ...core.hold import Arrival
from .commitlog import CommitLog
from .consumequeue import UNIT, ConsumeQueue
from .index import KeyIndex
from .mapped import Allocate, OpenBudget, fsync_directory
from .offsets import ConsumerOffsets
from .puttimes import PutTimes

log = Logger()


@dataclasses.dataclass(frozen=True)
class StoreConfig:
    """Store settings; names follow RocketMQ's ``MessageStoreConfig`` keys in snake case."""

    flush_disk_type: str = FLUSH_ASYNC
    mapped_file_size_commit_log: int = 1024 * 1024 * 1024
    mapped_file_size_consume_queue_entries: int = 300_000
    flush_interval_commit_log_ms: int = 500
    checkpoint_interval_ms: int = 1000
    sync_flush_timeout_ms: int = 5000
    max_message_size: int = 4 * 1024 * 1024
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_disk: int = 64 * 1024
    max_transfer_count_on_message_in_disk: int = 8
    access_message_in_memory_max_ratio: int = 40
    disk_max_used_space_ratio: int = 75
    file_reserved_time_hours: float = 72
    message_delay_level: str = DEFAULT_LEVELS
    store_host: HostPort = HostPort("127.0.0.1", 9876)
    check_crc_on_recover: bool = True
    max_mapped_consume_queue_files: int = 0  # 0: a quarter of the fd limit (``auto_queue_file_budget``)

    @classmethod
    def of(cls, config: Config) -> StoreConfig:
        """The store's settings, from the broker.conf keys that configure it."""
        host, port = config.advertised_address.rsplit(":", 1)
        return cls(
            flush_disk_type=config.flush_disk_type,
            mapped_file_size_commit_log=config.commit_log_segment_size,
            access_message_in_memory_max_ratio=config.access_message_in_memory_max_ratio,
            disk_max_used_space_ratio=config.disk_max_used_space_ratio,
            max_mapped_consume_queue_files=config.max_mapped_consume_queue_files,
            max_message_size=config.max_message_size,
            file_reserved_time_hours=config.file_reserved_time_hours,
            message_delay_level=config.message_delay_level,
            store_host=HostPort(host, int(port)),
        )


class GetStatus(enum.Enum):
    """``GetMessageStatus`` of RocketMQ's store."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


class PutStatus(enum.Enum):
    """``PutMessageStatus`` subset the broker maps to response codes."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"


@dataclasses.dataclass
class PutResult:
    """What a put did: its status and, when stored, the messages with their offsets filled in."""

    status: PutStatus
    messages: list[Message] = dataclasses.field(default_factory=list)
    store_host: HostPort = HostPort("127.0.0.1", 0)
    remark: str = ""

    @property
    def ok(self) -> bool:
        return self.status is PutStatus.PUT_OK or self.status is PutStatus.FLUSH_DISK_TIMEOUT

    @property
    def first_queue_offset(self) -> int:
        return self.messages[0].queue_offset if self.messages else 0

    @property
    def msg_ids(self) -> list[str]:
        """Offset message ids (store host + physical offset), one per stored message."""
        return [create_offset_msg_id(self.store_host, m.physical_offset) for m in self.messages]


class PutTicket:
    """The outcome of a put; ``done`` once the store acknowledged it (at once under ASYNC_FLUSH,
    after its fsync under SYNC_FLUSH). Callbacks run on the owner thread."""

    __slots__ = ("result", "done", "_callbacks", "end")

    def __init__(self, result: PutResult, end: int = 0) -> None:
        self.result = result
        self.done = False
        self.end = end
        self._callbacks: list[Callable[[PutResult], None]] = []

    def add_done_callback(self, fn: Callable[[PutResult], None]) -> None:
        if self.done:
            fn(self.result)
        else:
            self._callbacks.append(fn)

    def _complete(self, status: PutStatus | None = None) -> None:
        if status is not None:
            self.result.status = status
        self.done = True
        callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn(self.result)


@dataclasses.dataclass
class GetResult:
    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[bytes] = dataclasses.field(default_factory=list)

    @property
    def body(self) -> bytes:
        """The stored records back to back: a pull answer's body."""
        return b"".join(self.messages)


class MessageFilter(Protocol):
    """A pull's filter: first on the consume-queue entry's tag hash, then, for filters that need
    the message itself (SQL92), on the record (``matches_record``; None when not needed), and on
    an arrival for a held pull."""

    matches_record: Callable[[bytes], bool] | None

    def matches_tags_code(self, tags_code: int) -> bool: ...

    def matches_arrival(self, arrival: Arrival) -> bool: ...


@dataclasses.dataclass(frozen=True)
class TagFilter:
    """Broker-side tag filter by hash (``ExpressionMessageFilter``): None matches everything."""

    codes: frozenset[int] | None
    matches_record = None  # the tag hash decides

    def matches_tags_code(self, tags_code: int) -> bool:
        return self.codes is None or tags_code in self.codes

    def matches_arrival(self, arrival: Arrival) -> bool:
        return self.codes is None or arrival.tags_code in self.codes


class CompletionQueue:
    """Default ``post`` target: completions wait here until the owner runs ``run_pending``."""

    def __init__(self) -> None:
        self._items: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()

    def __call__(self, fn: Callable[[], None]) -> None:
        self._items.put(fn)

    def run_pending(self, timeout: float = 0.0) -> int:
        """Run queued completions; wait up to ``timeout`` seconds for the first one."""
        ran = 0
        try:
            fn = self._items.get(timeout=timeout) if timeout > 0 else self._items.get_nowait()
            while True:
                fn()
                ran += 1
                fn = self._items.get_nowait()
        except queue.Empty:
            return ran



#: The reference's ``diskSpaceWarningLevelRatio``: above this used share puts are refused.
DISK_FULL_RATIO = 0.90
_SPACE_ERRORS = (errno.ENOSPC, errno.EDQUOT)


class _Flushed(NamedTuple):
    """What a flush round made durable, and what it did not."""

    target: int  # the commit log is durable up to here (unless ``log_error``)
    log_error: OSError | None = None  # the commit log's fsync failed
    aux_error: OSError | None = None  # a checkpoint-side write failed (queues, index, offsets, checkpoint)
    unwritten_index: dict | None = None  # index entries to buffer again
    unflushed_queues: frozenset | set = frozenset()  # consume-queue files to fsync again


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
        self._post = self.completions
        self._allocate = allocate
        self.on_flush = on_flush  # called from the flush thread with each fsync round's seconds
        self.delay_levels_ms = parse_levels(config.message_delay_level)
        self._listeners: list[Callable[[Arrival], None]] = []
        self._queues: dict[tuple[str, int], ConsumeQueue] = {}
        self.mapped_queue_files = OpenBudget(config.max_mapped_consume_queue_files or auto_queue_file_budget())
        self._next_offset: dict[tuple[str, int], int] = {}
        # SYNC_FLUSH puts waiting for their fsync: ticket, messages, and when the put began (clock seconds)
        self._waiting: collections.deque[tuple[PutTicket, Iterable[Message], float]] = collections.deque()
        self._tag_codes: dict[str, int] = {}
        self._sync = config.flush_disk_type == FLUSH_SYNC
        self.put_count = 0  # messages stored since start
        self.get_count = 0  # messages returned by get_message since start
        self.put_failed = 0  # puts refused since start (the runtime info's putMessageFailedTimes)
        self.put_times = PutTimes(clock)  # how long puts take (putMessageDistributeTime, putLatency99...)
        self._start_pos = 0  # the commit log's end at start (``put_bytes`` counts from there)
        self._dispatched = 0
        self._dirty_cq: set = set()
        self._flushed = 0
        self._io_error: OSError | None = None  # the commit log failed: not writable until a restart
        self.disk_full: str | None = None  # why puts wait for room; ``check_disk`` clears it
        self._not_writable: str | None = None  # either of the two, as a put's remark
        self._memory_limit = _physical_memory() * config.access_message_in_memory_max_ratio // 100
        self._flusher: threading.Thread | None = None
        self._owner = threading.get_ident()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._started = False
        self._closed = False
        self._delay_offsets_saved: dict[int, int] = {}
        self._segment_newest: dict[int, int | None] = {}  # full segment base → newest store time
        # queues destroyed since start → commit-log end then: a crash recovery must not dispatch
        # their older records again (``config/droppedQueues.json``; cleared at the next start)
        self._dropped: dict[tuple[str, int], int] = {}
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
        self._delay_offsets: dict[int, int] = {
            int(k): v for k, v in read_json(self.root / "config" / "delayOffset.json", {}).items()
        }
        self._delay_offsets_saved = dict(self._delay_offsets)
        cq_root = self.consumequeue_dir
        cq_root.mkdir(exist_ok=True)
        for topic_dir in sorted(cq_root.iterdir()):
            for queue_dir in sorted(topic_dir.iterdir()):
                if queue_dir.name.isdigit():
                    self._queue(topic_dir.name, int(queue_dir.name))
        self._dropped = {(t, int(q)): int(end) for t, q, end in read_json(self._dropped_path, [])}
        checkpoint = read_json(self.root / "checkpoint", {})
        abort = self.root / "abort"
        if abort.exists() or "end" not in checkpoint:
            self._recover(int(checkpoint.get("physical", 0)))
        else:
            self.commitlog.write_pos = max(int(checkpoint["end"]), self.commitlog.min_offset)
        self._dispatched = self._flushed = self._start_pos = self.commitlog.write_pos
        for cq in self._queues.values():
            cq.correct_min(self.commitlog.min_offset)
        for key, cq in self._queues.items():
            self._next_offset[key] = cq.max_offset
        write_json_atomic(self.root / "checkpoint", {"physical": self._dispatched})
        if self._dropped:  # nothing below the checkpoint just written is dispatched again
            self._dropped.clear()
            self._dropped_path.unlink(missing_ok=True)
            backup_of(self._dropped_path).unlink(missing_ok=True)
        abort.touch()
        self._started = True
        self._owner = threading.get_ident()
        self.commitlog.start_prefaulting()
        self._flusher = threading.Thread(target=self._flush_loop, name="rmqproxy-store-flush", daemon=True)
        self._flusher.start()

    def shutdown(self) -> None:
        """Flush everything, answer waiting puts, record a clean stop and close the files."""
        if not self._started:
            return
        self._started = False
        self._stop.set()
        self._wake.set()
        if self._flusher is not None:
            self._flusher.join()
        self._on_flushed(self._flush_round(checkpoint=False))  # completes and dispatches every waiting put
        final = self._flush_round(checkpoint=True)
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
        for cq in self._queues.values():
            cq.close()

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
            record = encode_message(msg)
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
            self._wake.set()
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
                    record = encode_message(msg)
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
            self._wake.set()
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
            self._park_if_delayed(msg, now_ms)
        msg.store_timestamp = now_ms
        msg.store_host = host
        msg.body_crc = None
        if len(msg.topic) > 42:  # only long topics can exceed 127 UTF-8 bytes
            msg.magic = MAGIC_V1 if len(msg.topic.encode()) <= 127 else MAGIC_V2
        return None

    def _queue_for(self, key: tuple[str, int]) -> ConsumeQueue | PutTicket:
        """The consume queue of a put, created now, or a failed ticket for a refused name."""
        try:
            return self._queue(*key)
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
        """Owner thread, periodically: the used share of the store's file system. Above
        ``disk_max_used_space_ratio`` % expired segments are deleted now (the reference's meaning);
        above ``DISK_FULL_RATIO`` puts are refused; below it a disk found full takes puts again."""
        ratio = self.disk_ratio()
        if ratio * 100 > self.config.disk_max_used_space_ratio and self.delete_expired():
            ratio = self.disk_ratio()
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

    def _park_if_delayed(self, msg: Message, now_ms: int) -> None:
        level_text = msg.properties.get("DELAY")
        if not level_text or msg.topic == SCHEDULE_TOPIC or not level_text.isdigit():
            return
        level = min(int(level_text), len(self.delay_levels_ms))
        if level <= 0:
            return
        msg.properties["REAL_TOPIC"] = msg.topic
        msg.properties["REAL_QID"] = str(msg.queue_id)
        msg.topic = SCHEDULE_TOPIC
        msg.queue_id = level - 1

    def _tags_code(self, msg: Message) -> int:
        """The consume-queue tags code: the tag's hash, or a parked message's delivery time."""
        if msg.topic == SCHEDULE_TOPIC:
            return self._deliver_time(msg)
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

    def _deliver_time(self, msg: Message) -> int:
        return msg.store_timestamp + self.delay_levels_ms[min(msg.queue_id, len(self.delay_levels_ms) - 1)]

    def _dispatch(self, msgs: Iterable[Message]) -> None:
        """Make stored messages readable: consume-queue entry and index entries, then arrival
        listeners. Owner thread only (the flusher gets snapshots through ``_snapshot``)."""
        queues = self._queues
        for msg in msgs:
            self._dispatch_one(msg, queues.get((msg.topic, msg.queue_id)) or self._queue(msg.topic, msg.queue_id))

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

    def _snapshot(self) -> tuple[int, set, dict]:
        """Owner thread: what the next checkpoint covers — the dispatched position, the consume
        queue files written since the last one, and the buffered index entries."""
        dirty, self._dirty_cq = self._dirty_cq, set()
        return self._dispatched, dirty, self.index.take_pending()

    # --- flush ----------------------------------------------------------------------------

    def _flush_loop(self) -> None:
        interval = self.config.flush_interval_commit_log_ms / 1000
        last_checkpoint = time.monotonic()
        while not self._stop.is_set():
            self._wake.wait(interval)
            self._wake.clear()
            if self._stop.is_set():
                break
            due = time.monotonic() - last_checkpoint >= self.config.checkpoint_interval_ms / 1000
            flushed = self._flush_round(checkpoint=due)
            self._post(lambda f=flushed: self._on_flushed(f))
            if due:
                last_checkpoint = time.monotonic()

    def _flush_round(self, *, checkpoint: bool) -> _Flushed:
        """fsync the commit log up to the written end and return that end (and any error) for
        ``_on_flushed``; with ``checkpoint``, also make consume queues, index and offsets durable
        and move the checkpoint. Runs on the flush thread, or on the owner at shutdown. What a
        failed round did not make durable is handed back, to be tried again next round."""
        snapshot = None
        if checkpoint:
            snapshot = self._snapshot() if self._on_owner() else self._snapshot_from_owner()
        dispatched, dirty, pending = snapshot if snapshot is not None else (0, set(), {})
        target = self.commitlog.write_pos
        try:
            start = self._flushed - self._flushed % self.commitlog.segment_size
            began = time.perf_counter()
            dirty_log = self.commitlog.dirty_segments(start, target) if target > self._flushed else []
            for segment in dirty_log:
                segment.fsync()
            self.commitlog.files.sync_directory()
            if dirty_log and self.on_flush is not None:
                self.on_flush(time.perf_counter() - began)
            self._flushed = target
        except OSError as exc:
            return _Flushed(target, exc, None, pending, dirty)
        if snapshot is None:
            return _Flushed(target)
        try:
            for segment in dirty:
                segment.fsync()
            for cq in list(self._queues.values()):
                cq.files.sync_directory()
            self.index.write(pending)
            write_json_atomic(self.root / "checkpoint", {"physical": dispatched})
            self.offsets.persist()
            delay_offsets = dict(self._delay_offsets)
            if delay_offsets != self._delay_offsets_saved:
                write_json_atomic(
                    self.root / "config" / "delayOffset.json", {str(k): v for k, v in delay_offsets.items()}
                )
                self._delay_offsets_saved = delay_offsets
        except OSError as exc:
            return _Flushed(target, None, exc, pending, dirty)
        return _Flushed(target)

    def _on_owner(self) -> bool:
        return threading.get_ident() == self._owner

    def _snapshot_from_owner(self) -> tuple[int, set, dict] | None:
        """Ask the owner thread (through ``post``) for a checkpoint snapshot; None if it does not
        answer within a flush interval (the checkpoint then waits for the next round)."""
        box: list = []
        ready = threading.Event()

        def take() -> None:
            if not self._closed:
                box.append(self._snapshot())
            ready.set()

        self._post(take)
        ready.wait(max(self.config.flush_interval_commit_log_ms, 100) / 1000)
        return box[0] if box else None

    def _on_flushed(self, flushed: _Flushed) -> None:
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

    # --- get ------------------------------------------------------------------------------

    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msgs: int,
        message_filter: MessageFilter | None = None,
        max_bytes: int | None = None,
    ) -> GetResult:
        """Read up to ``max_msgs`` matching records from ``offset`` (``DefaultMessageStore.getMessage``
        of 4.9.8: same statuses, next/min/max offsets and transfer limits)."""
        cq = self._queues.get((topic, queue_id))
        if cq is None:
            return GetResult(GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        min_offset, max_offset = cq.min_offset, cq.max_offset
        if max_offset == 0:
            return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, min_offset, max_offset)
        if offset < min_offset:
            return GetResult(GetStatus.OFFSET_TOO_SMALL, min_offset, min_offset, max_offset)
        if offset == max_offset:
            return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, offset, min_offset, max_offset)
        if offset > max_offset:
            return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, max_offset, min_offset, max_offset)
        scan_limit = max(16000, max_msgs * UNIT) // UNIT  # index bytes a read may examine
        buffer = cq.index_buffer(offset, scan_limit)
        if buffer is None:
            return GetResult(GetStatus.OFFSET_FOUND_NULL, cq.roll_next(offset), min_offset, max_offset)

        config = self.config
        result = GetResult(GetStatus.NO_MATCHED_MESSAGE, offset, min_offset, max_offset)
        messages = result.messages
        total = 0
        max_phys = self.commitlog.write_pos
        next_file_start = None
        examined = 0
        matches_record = message_filter.matches_record if message_filter is not None else None
        for phys, size, tags_code in struct.iter_unpack(">qiq", buffer):
            if next_file_start is not None and phys < next_file_start:
                examined += 1
                continue
            if messages:
                if len(messages) >= max_msgs:
                    break
                in_disk = max_phys - phys > self._memory_limit
                limit_bytes = (
                    config.max_transfer_bytes_on_message_in_disk
                    if in_disk
                    else config.max_transfer_bytes_on_message_in_memory
                )
                limit_count = (
                    config.max_transfer_count_on_message_in_disk
                    if in_disk
                    else config.max_transfer_count_on_message_in_memory
                )
                if max_bytes is not None:
                    limit_bytes = min(limit_bytes, max_bytes)
                if total + size > limit_bytes or len(messages) > limit_count - 1:
                    break
            examined += 1
            if message_filter is not None and not message_filter.matches_tags_code(tags_code):
                continue
            record = self.commitlog.read(phys, size)
            if record is None:
                if not messages:
                    result.status = GetStatus.MESSAGE_WAS_REMOVING
                next_file_start = self.commitlog.roll_next(phys)
                continue
            next_file_start = None
            if matches_record is not None and not matches_record(record):
                continue
            messages.append(record)
            total += size
            result.status = GetStatus.FOUND
        result.next_begin_offset = offset + examined
        self.get_count += len(messages)
        return result

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

    def disk_ratio(self) -> float:
        """Used share of the file system holding the store (disk-full checks and alerts)."""
        usage = shutil.disk_usage(self.root)
        return usage.used / usage.total if usage.total else 0.0

    def disk_space(self) -> tuple[int, int]:
        """Total and usable bytes of the file system holding the store (``commitLogDirCapacity``)."""
        usage = shutil.disk_usage(self.root)
        return usage.total, usage.free

    @property
    def commitlog_dir(self) -> Path:
        return self.root / "commitlog"

    @property
    def consumequeue_dir(self) -> Path:
        return self.root / "consumequeue"

    # --- runtime figures ------------------------------------------------------------------

    @property
    def put_bytes(self) -> int:
        """Record bytes stored since start (``putMessageSizeTotal``): the commit log's growth less
        the blanks that end its segments, so that a put pays nothing for it."""
        return self.commitlog.write_pos - self._start_pos - self.commitlog.blank_bytes

    @property
    def unflushed_bytes(self) -> int:
        """Commit-log bytes written and not yet fsynced (``remainHowManyDataToFlush``)."""
        return max(0, self.commitlog.write_pos - self._flushed)

    def delay_progress(self) -> dict[int, tuple[int, int]]:
        """Per delay level (from 1) whose delivery has begun: the offset of its next message to
        deliver and the end of its schedule queue (``scheduleMessageOffset_<level>``)."""
        return {queue_id + 1: (offset, self.max_offset(SCHEDULE_TOPIC, queue_id))
                for queue_id, offset in sorted(self._delay_offsets.items())}  # fmt: skip

    # --- offsets and lookups --------------------------------------------------------------

    def _queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        key = (topic, queue_id)
        cq = self._queues.get(key)
        if cq is None:
            cq = ConsumeQueue(
                self._queue_dir(topic, queue_id),
                self.config.mapped_file_size_consume_queue_entries,
                self._allocate,
                self.mapped_queue_files,
            )
            self._queues[key] = cq
        return cq

    def _queue_dir(self, topic: str, queue_id: int) -> Path:
        """``consumequeue/<topic>/<queue>``, refused (ValueError) unless it lies right under the
        store's consume-queue folder: names are validated where they enter, and this is the
        defence behind that, so no name can create a file outside the store."""
        top = self.consumequeue_dir.resolve()
        directory = (top / topic / str(queue_id)).resolve()
        if directory.parent.parent != top or queue_id < 0:
            raise ValueError(f"refusing a consume queue outside the store: topic {topic!r}, queue {queue_id}")
        return directory

    def queues(self) -> list[tuple[str, int]]:
        return sorted(self._queues)

    def min_offset(self, topic: str, queue_id: int) -> int:
        cq = self._queues.get((topic, queue_id))
        return cq.min_offset if cq is not None else 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        """Next queue offset to be readable (``getMaxOffsetInQueue``)."""
        cq = self._queues.get((topic, queue_id))
        return cq.max_offset if cq is not None else 0

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

    def read_record(self, phys: int) -> bytes | None:
        """The stored record at a physical offset (VIEW_MESSAGE_BY_ID, send-back)."""
        size = self.commitlog.size_at(phys)
        return self.commitlog.read(phys, size) if size is not None else None

    def look_message(self, phys: int) -> Message | None:
        record = self.read_record(phys)
        if record is None:
            return None
        try:
            return decode_message(record)[0]
        except MessageError:
            return None

    def message_at(self, topic: str, queue_id: int, offset: int) -> Message | None:
        """The message at a queue offset, or None."""
        cq = self._queues.get((topic, queue_id))
        entry = cq.entry(offset) if cq is not None else None
        return self.look_message(entry[0]) if entry is not None else None

    def in_disk(self, topic: str, queue_id: int, offset: int) -> bool:
        """Whether the message at a queue offset lies beyond the memory window reads treat as
        cached (``checkInDiskByConsumeOffset``); False when the queue has no such entry."""
        cq = self._queues.get((topic, queue_id))
        entry = cq.entry(offset) if cq is not None else None
        return entry is not None and self.commitlog.write_pos - entry[0] > self._memory_limit

    def _store_time(self, phys: int) -> int | None:
        segment = self.commitlog.files.segment_for(phys)
        if segment is None or phys + STORE_TIMESTAMP_END_V6 > self.commitlog.write_pos:
            return None
        return record_store_timestamp(segment.mm, phys - segment.base)

    def earliest_message_time(self, topic: str, queue_id: int) -> int | None:
        cq = self._queues.get((topic, queue_id))
        entry = cq.entry(cq.min_offset) if cq is not None else None
        return self._store_time(entry[0]) if entry is not None else None

    def search_offset_by_timestamp(self, topic: str, queue_id: int, timestamp: int) -> int:
        """Queue offset whose store time equals ``timestamp`` or is nearest to it (ties and
        equal distances go to the earlier); all later → the first offset, all earlier → the last
        message's offset, empty → 0 (``ConsumeQueue.getOffsetInQueueByTime``)."""
        cq = self._queues.get((topic, queue_id))
        if cq is None or cq.max_offset <= cq.min_offset:
            return 0
        lo, hi = cq.min_offset, cq.max_offset - 1
        while lo < hi:  # first offset whose store time >= timestamp
            mid = (lo + hi) // 2
            t = self._store_time(cq.entry(mid)[0])
            if t is not None and t >= timestamp:
                hi = mid
            else:
                lo = mid + 1
        right_time = self._store_time(cq.entry(lo)[0])
        if right_time is None or right_time < timestamp:
            return lo  # all earlier: the last message
        if right_time == timestamp or lo == cq.min_offset:
            return lo
        left_time = self._store_time(cq.entry(lo - 1)[0]) or 0
        return lo if timestamp - left_time > right_time - timestamp else lo - 1

    def query_by_key(self, topic: str, key: str, max_num: int, begin_ms: int = 0, end_ms: int = 2**62) -> list[bytes]:
        """Records of ``topic`` whose KEYS or UNIQ_KEY contain ``key``, newest first."""
        return self.messages_by_keys(topic, [key], max_num, begin_ms, end_ms).get(key, [])

    def messages_by_keys(
        self, topic: str, keys: Iterable[str], max_num: int, begin_ms: int = 0, end_ms: int = 2**62
    ) -> dict[str, list[bytes]]:
        """``query_by_key`` of many keys in one pass over the index: key -> its records (keys
        with none are left out)."""
        found: dict[str, list[bytes]] = {}
        for key, physs in self.index.lookup_many(topic, keys).items():
            for phys in physs:
                msg = self.look_message(phys)
                if msg is None or msg.topic != topic or not begin_ms <= msg.store_timestamp <= end_ms:
                    continue
                if key in (msg.properties.get("KEYS") or "").split() or msg.properties.get("UNIQ_KEY") == key:
                    records = found.setdefault(key, [])
                    records.append(self.read_record(phys))
                    if len(records) >= max_num:
                        break
        return found

    # --- delay levels ---------------------------------------------------------------------

    def deliver_due(self, now_ms: int | None = None) -> int | None:
        """Re-put parked messages whose delay has passed to their real topic; return the epoch ms
        of the next delivery due, or None when nothing waits."""
        now_ms = int(self.clock() * 1000) if now_ms is None else now_ms
        next_due = None
        for level in range(len(self.delay_levels_ms)):
            cq = self._queues.get((SCHEDULE_TOPIC, level))
            if cq is None:
                continue
            offset = max(self._delay_offsets.get(level, 0), cq.min_offset)
            while offset < cq.max_offset:
                phys, _size, deliver_at = cq.entry(offset)
                if deliver_at > now_ms:
                    next_due = deliver_at if next_due is None else min(next_due, deliver_at)
                    break
                parked = self.look_message(phys)
                if parked is not None:
                    self.unpark(parked)
                offset += 1
            self._delay_offsets[level] = offset
        return next_due

    def unpark(self, parked: Message, drop: tuple[str, ...] = ("DELAY",), add: dict[str, str] | None = None) -> PutTicket | None:
        """Put a parked message (delay level or timer) into its ``REAL_TOPIC`` and ``REAL_QID``,
        without the ``drop`` properties and with ``add``; None if it names no real topic."""
        props = dict(parked.properties)
        topic = props.pop("REAL_TOPIC", None)
        queue_id = props.pop("REAL_QID", "0")
        for key in drop:
            props.pop(key, None)
        if add:
            props.update(add)
        if topic is None:
            return None
        msg = Message(
            topic,
            parked.body,
            props,
            queue_id=int(queue_id) if queue_id.isdigit() else 0,
            flag=parked.flag,
            sys_flag=parked.sys_flag & ~STOREHOST_V6_FLAG,
            born_timestamp=parked.born_timestamp,
            born_host=parked.born_host,
            reconsume_times=parked.reconsume_times,
            prepared_transaction_offset=parked.prepared_transaction_offset,
        )
        return self.put(msg)

    def queue_entries(self, topic: str, queue_id: int, start: int, max_entries: int) -> list[tuple[int, int, int]]:
        """(physical offset, size, tags code) of up to ``max_entries`` consume-queue entries from
        ``start``, never past the end of the file holding it (QUERY_CONSUME_QUEUE)."""
        cq = self._queues.get((topic, queue_id))
        return cq.entries(start, max_entries) if cq is not None else []

    def tags_codes(self, topic: str, queue_id: int, start: int) -> Iterator[tuple[int, int]]:
        """(queue offset, tags code) of each entry of a queue from ``start`` to its end (a parked
        queue's tags codes are delivery times)."""
        cq = self._queues.get((topic, queue_id))
        if cq is None:
            return
        for offset in range(max(start, cq.min_offset), cq.max_offset):
            entry = cq.entry(offset)
            if entry is not None:
                yield offset, entry[2]

    # --- retention ------------------------------------------------------------------------

    def delete_expired(self, now_ms: int | None = None) -> int:
        """Delete whole commit-log segments whose newest message is older than
        ``file_reserved_time_hours`` (never the one being written); returns how many."""
        now_ms = int(self.clock() * 1000) if now_ms is None else now_ms
        keep_ms = self.config.file_reserved_time_hours * 3_600_000
        deleted = 0
        segments = self.commitlog.files.ordered()
        for segment in segments[:-1]:
            newest = self._segment_newest.get(segment.base)
            if newest is None:  # a full segment never changes: walk it once
                newest = self._segment_newest[segment.base] = self._newest_time_in(segment)
            if newest is None or now_ms - newest < keep_ms:
                break
            self.commitlog.files.drop(segment)
            self.index.drop_segment(segment.base)
            self._segment_newest.pop(segment.base, None)
            deleted += 1
        if deleted:
            phys_min = self.commitlog.min_offset
            for cq in self._queues.values():
                cq.correct_min(phys_min)
        return deleted

    def _newest_time_in(self, segment) -> int | None:
        """Store time of the last record in a full segment (walks records by TOTALSIZE)."""
        pos, newest = segment.base, None
        while pos < segment.end - 8:
            size = self.commitlog.size_at(pos)
            if size is None:
                break
            newest = self._store_time(pos)
            pos += size
        return newest

    # --- cleaning (mqadmin cleanExpiredCQ, cleanUnusedTopic) --------------------------------

    @property
    def _dropped_path(self) -> Path:
        return self.root / "config" / "droppedQueues.json"

    def correct_min_offsets(self) -> None:
        """Move every queue's min offset past entries whose records retention deleted, and delete
        consume-queue files holding only such entries (``delete_expired`` does it after a deletion)."""
        phys_min = self.commitlog.min_offset
        for cq in list(self._queues.values()):
            cq.correct_min(phys_min)

    def queue_is_empty(self, topic: str, queue_id: int) -> bool:
        """Whether a queue has no entry a consumer can read (none yet, or all expired)."""
        cq = self._queues.get((topic, queue_id))
        return cq is None or cq.min_offset >= cq.max_offset

    def destroy_queue(self, topic: str, queue_id: int) -> bool:
        """Delete a consume queue, files and folder: its offsets start again at 0 if it is written
        again. Its records stay in the commit log until retention deletes them, but are never
        dispatched into it again, a crash recovery included. False, and nothing done, while a
        SYNC_FLUSH put to it waits for its fsync. OSError if the record of it cannot be saved."""
        key = (topic, queue_id)
        cq = self._queues.get(key)
        if cq is None:
            return True
        if any(m.topic == topic and m.queue_id == queue_id for _, msgs, _ in self._waiting for m in msgs):
            return False
        directory = self._queue_dir(topic, queue_id)
        dropped = {**self._dropped, key: self.commitlog.write_pos}
        write_json_atomic(self._dropped_path, [[t, q, end] for (t, q), end in sorted(dropped.items())])
        self._dropped = dropped
        del self._queues[key]
        self._next_offset.pop(key, None)
        segments = cq.files.ordered()
        self._dirty_cq.difference_update(segments)
        cq.files.dropped = True  # a directory fsync the flusher has begun finds nothing: fine
        cq.close()
        for segment in segments:
            segment.path.unlink(missing_ok=True)
        shutil.rmtree(directory, ignore_errors=True)
        changed = directory.parent
        try:
            changed.rmdir()  # the topic's folder, once its last queue is gone
            changed = changed.parent
        except OSError:
            pass
        try:
            fsync_directory(changed)
        except OSError:
            log.warn("store: cannot fsync {folder} after deleting a consume queue", folder=changed)
        return True

    # --- recovery -------------------------------------------------------------------------

    def _recover(self, checkpoint: int) -> None:
        """Re-dispatch every valid record from the checkpoint on and cut the log at the first
        torn or corrupt one; consume-queue entries past the cut are dropped."""
        start = max(checkpoint, self.commitlog.min_offset)
        if self.commitlog.files.segment_for(start) is None and self.commitlog.files.last is not None:
            start = self.commitlog.min_offset
        dropped = self._dropped
        for phys, msg in self.commitlog.scan(start, check_crc=self.config.check_crc_on_recover):
            if dropped and phys < dropped.get((msg.topic, msg.queue_id), -1):
                continue  # its queue was destroyed (CLEAN_UNUSED_TOPIC): it stays gone
            cq = self._queue(msg.topic, msg.queue_id)
            cq.put(msg.queue_offset, phys, msg.store_size, self._tags_code(msg))
            self.index.add_message(msg.topic, msg.properties.get("KEYS"), msg.properties.get("UNIQ_KEY"), phys)
            self.recovered_records += 1
        end = self.commitlog.scan_end
        self.commitlog.truncate(end)
        for cq in self._queues.values():
            cq.truncate_to_phys(end)
        self.index.write(self.index.take_pending())
        for cq in self._queues.values():
            for segment in cq.files.ordered():
                segment.fsync()
        for segment in self.commitlog.files.ordered():
            segment.fsync()


def used_ratio(path: Path) -> float:
    """The used share of ``path``'s file system as the reference's runtime info gives it
    (``UtilAll.getDiskPartitionSpaceUsedPercent``: used over used + usable, rounded up to a whole
    percent), or -1.0 when it cannot be measured (no such path)."""
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return -1.0
    entire = usage.used + usage.free  # ``free`` is what an unprivileged writer may use
    if usage.total <= 0 or entire <= 0:
        return -1.0
    return -(-usage.used * 100 // entire) / 100


def _encode_failure(exc: MessageError) -> PutStatus:
    return PutStatus.PROPERTIES_SIZE_EXCEEDED if "properties" in exc.what else PutStatus.MESSAGE_ILLEGAL

