"""The store's value types: its settings, the statuses and results of puts and reads, the ticket
a put returns, pull filters, and the default completion queue. No behaviour of the store lives here."""

from __future__ import annotations

import dataclasses
import enum
import queue
from collections.abc import Callable
from typing import Protocol

from codec.message import HostPort, Message, create_offset_msg_id

from ...core.config import FLUSH_ASYNC, Config
from ...core.delay_levels import DEFAULT_LEVELS
from ...core.hold import Arrival


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
    """What a read found: its status, where the next read begins, the queue's bounds, the records."""

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

