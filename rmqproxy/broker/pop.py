"""Pop-style consumption, for RocketMQ 5 gRPC consumers: what each group has in flight.

A receive takes messages for a group from any queue of a topic and makes them invisible to the
group for a while; an ack ends a message, a change of invisible duration moves its return, and a
message not acked in time is visible again and delivered once more with its attempt counted. Past
the group's attempts (``retryMaxTimes + 1``) it goes to the group's dead-letter queue instead.

State, per (group, topic): a cursor per queue (the next offset never delivered) and the messages in
flight, each with its attempt, its visibility time and a handle generation (``seq``). A receipt
handle names the queue, offset and generation and carries a MAC over them and the group and topic,
so a forged handle, one of another group or topic, or one an ack or a redelivery has made stale
never acts on a message (``ReceiptRefused``). FIFO (orderly) groups deliver a queue's messages in
order: a queue with a message in flight and not yet visible again gives nothing more.

Durability: every change is one line appended to ``<store>/pop/journal`` before it is answered
(``os.write``: a ``kill -9`` loses nothing written), fsynced every ``FSYNC_S`` (after an OS crash
an ack of the last moment may be lost and its message delivered again: at least once, never at
most once), and replayed at start; the journal is rewritten as a snapshot of the live state when
it outgrows ``JOURNAL_MAX_BYTES``. The group's committed consumer offset follows its oldest
message in flight (or its cursors), so consumer progress and lag read as for remoting consumers.

Waiting receives are held by the hold service (``rmqproxy.core.hold``), keyed by (topic,
``ANY_QUEUE``): an arrival on any queue of the topic, or a message of the group becoming visible
again (its own alarm), wakes them. Only the reactor thread calls this module.
"""

from __future__ import annotations

import dataclasses
import heapq
import hmac
import itertools
import os
import secrets
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

from twisted.internet import defer
from twisted.logger import Logger

from codec.message import Message, decode_messages

from ..core.clocks import Wall
from ..core.alarm import Alarm
from ..core.hold import (WAKE_DISCONNECT, WAKE_EVICTED, WAKE_FULL, WAKE_NONE, WAKE_RETURNED, Arrival, HeldPull,
                         HoldService, always)
from ..core.names import dlq_topic
from .store import GetStatus, MessageFilter, MessageStore

log = Logger()

#: The hold-service queue id of a receive over every queue of a topic.
ANY_QUEUE = -1
#: How often the journal is fsynced (``flushDiskType=ASYNC_FLUSH``).
FSYNC_S = 0.5
#: Past this size the journal is rewritten as a snapshot of what is live.
JOURNAL_MAX_BYTES = 64 << 20
#: How long before its return an auto-renewed message is renewed, by how much, and for how long in
#: all (a 5.x Proxy's ``renewAheadTimeMillis``, its first step, and ``renewMaxTimeMillis``).
RENEW_AHEAD_S = 10.0
RENEW_BY_S = 60.0
RENEW_MAX_S = 3 * 3600.0
#: How soon the messages of a client that went away are visible again (a Proxy's ``invisibleTimeMillisWhenClear``).
RETURN_WHEN_GONE_S = 1.0


class ReceiptRefused(ValueError):
    """A receipt handle that does not name a message in flight of this group and topic: ``expired``
    when it did once (acked, delivered again, or its invisibility over), else malformed or forged."""

    def __init__(self, why: str, *, expired: bool) -> None:
        super().__init__(why)
        self.expired = expired


class ConnectionFull(RuntimeError):
    """The receive's connection already holds ``maxHeldPullsPerConnection`` waiting pulls and receives."""


class InvisibleFull(RuntimeError):
    """The group has ``max_in_flight`` messages in flight on the topic already."""


class GaveWay(RuntimeError):
    """A held receive ended at ``maxHeldPulls`` for a pull of a connection below its fair share
    (``HoldService``, case E): its connection held more than its share. ``received`` is how it
    ended (nothing delivered, wake ``evicted``), for the pull event."""

    def __init__(self, why: str, received: Received) -> None:
        super().__init__(why)
        self.received = received


@dataclasses.dataclass(slots=True)
class InFlight:
    """One message delivered and not yet acked."""

    queue_id: int
    offset: int
    attempt: int  # deliveries so far: the delivery_attempt of its last delivery
    seq: int  # handle generation: only a receipt of the current one acts on it
    visible_at: float  # wall-clock epoch seconds when it is visible again
    renew_for: str = ""  # the client whose auto-renewing receive took it ("": not renewed)
    renew_until: float = 0.0  # when server renewals stop


class Delivery(NamedTuple):
    """A message a receive hands out: the message, its attempt (1 on first delivery), its receipt
    handle and when it is visible again."""

    message: Message
    attempt: int
    handle: str
    visible_at: float


@dataclasses.dataclass
class Receive:
    """What one receive asks for (the gRPC layer validated it)."""

    group: str
    topic: str
    filter: MessageFilter | None
    batch: int
    invisible_s: float
    renew_for: str = ""  # auto_renew: the client id whose online presence keeps renewing
    fifo: bool = False
    max_attempts: int = 17


class Received(NamedTuple):
    """How a receive ended: what it delivered, what woke it (``WAKE_NONE``: answered at once),
    when its hold began (None: not held) and when it was answered (reactor seconds)."""

    deliveries: list[Delivery]
    wake: str
    held_since: float | None
    answered: float


class _GroupTopic:
    """The pop state of one group on one topic."""

    __slots__ = ("group", "topic", "cursors", "in_flight", "size", "due", "next_queue", "dirty")

    def __init__(self, group: str, topic: str) -> None:
        self.group = group
        self.topic = topic
        self.cursors: dict[int, int] = {}
        self.in_flight: dict[int, dict[int, InFlight]] = {}  # queue id -> offset -> message
        self.size = 0  # messages in ``in_flight``, kept as they come and go
        self.due: list[tuple[float, int, int, int]] = []  # heap of (visible_at, seq, queue, offset), stale ones skipped
        self.next_queue = 0  # where the next receive starts looking for new messages
        self.dirty: set[int] = set()  # queues whose committed offset is to be brought up to date

    def count(self) -> int:
        return self.size

    def get(self, queue_id: int, offset: int) -> InFlight | None:
        queue = self.in_flight.get(queue_id)
        return queue.get(offset) if queue is not None else None


class PopService:
    """Pop state and receives for every group (see the module docstring)."""

    def __init__(self, store: MessageStore, holds: HoldService, wall: Wall, alarm: Callable[[Callable[[], None]], Alarm],
                 path: Path, *, max_in_flight: int, sync: bool = False) -> None:  # fmt: skip
        self.store = store
        self.holds = holds  # a held receive waits on its clock, the reactor's (monotonic)
        self.wall = wall  # visibility times: journaled, so wall-clock times that survive a restart
        self.path = path
        self.max_in_flight = max_in_flight
        self.sync = sync
        self._alarm = alarm(self._visible_again)
        self._pushes = 0  # returns queued, for an occasional look at how many are stale
        self._returns: list[tuple] = []  # heap of (visible_at, seq, group, topic, queue, offset): wake-ups due
        self._state: dict[tuple[str, str], _GroupTopic] = {}
        self._waiting: dict[tuple[str, str], dict[int, HeldPull]] = {}  # receives held, by group and topic
        self._topics_waited: dict[str, int] = {}  # topic -> receives held on it
        self._seq = itertools.count(1)
        self._key = b""
        self._fd = -1
        self._journal_bytes = 0
        self.dlq_forwards: dict[tuple[str, str], int] = {}  # (group, topic) -> messages put in the group's DLQ
        self.redeliveries: dict[tuple[str, str], int] = {}  # (group, topic) -> deliveries past the first
        self.on_dlq: Callable[[Message, str], Any] | None = None  # set by the owner: puts a message in a DLQ

    # --- start, journal and stop ------------------------------------------------------------

    def start(self) -> None:
        """Load the handle key and replay the journal."""
        self.path.mkdir(parents=True, exist_ok=True)
        key_file = self.path / "handle.key"
        if not key_file.exists():
            tmp = key_file.with_suffix(".tmp")
            tmp.write_bytes(secrets.token_bytes(32))
            os.replace(tmp, key_file)
        self._key = key_file.read_bytes()
        journal = self.path / "journal"
        top = 0
        if journal.exists():
            top = self._replay(journal.read_bytes())
        self._seq = itertools.count(top + 1)
        for gt in self._state.values():
            gt.size = sum(len(queue) for queue in gt.in_flight.values())
        self._fd = os.open(journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._journal_bytes = os.fstat(self._fd).st_size
        for gt in self._state.values():  # each message's return, in both heaps
            for queue in gt.in_flight.values():
                for entry in queue.values():
                    self._return_at(gt, entry)

    def _replay(self, data: bytes) -> int:
        """Apply the journal's lines; a torn last line (a crash mid-write) is ignored. Returns the
        highest handle generation seen."""
        top = 0
        lines = data.split(b"\n")
        for number, raw in enumerate(lines[:-1] if not data.endswith(b"\n") else lines, 1):
            if not raw:
                continue
            try:
                kind, group, topic, *rest = raw.decode().split(" ")
                gt = self._group_topic(group, topic)
                queue_id, offset = int(rest[0]), int(rest[1])
                if kind == "P":  # delivered: attempt seq visible_ms [renew_for renew_until_ms]
                    attempt, seq, visible = int(rest[2]), int(rest[3]), int(rest[4]) / 1000
                    renew_for = rest[5] if len(rest) > 5 else ""
                    renew_until = int(rest[6]) / 1000 if len(rest) > 6 else 0.0
                    gt.in_flight.setdefault(queue_id, {})[offset] = InFlight(queue_id, offset, attempt, seq, visible,
                                                                             renew_for, renew_until)  # fmt: skip
                    top = max(top, seq)
                elif kind == "V":  # visibility moved: seq visible_ms
                    entry = gt.get(queue_id, offset)
                    if entry is not None:
                        entry.seq, entry.visible_at = int(rest[2]), int(rest[3]) / 1000
                        top = max(top, entry.seq)
                elif kind == "A":  # acked (or forwarded to the DLQ)
                    queue = gt.in_flight.get(queue_id)
                    if queue is not None:
                        queue.pop(offset, None)
                        if not queue:
                            del gt.in_flight[queue_id]
                elif kind == "C":  # cursor: the next offset never delivered
                    gt.cursors[queue_id] = max(gt.cursors.get(queue_id, 0), offset)
                    continue
                else:
                    raise ValueError(f"unknown record {kind!r}")
                if kind == "P":
                    gt.cursors[queue_id] = max(gt.cursors.get(queue_id, 0), offset + 1)
            except (ValueError, IndexError) as exc:
                log.warn("pop journal line {n} unreadable ({error}), skipped: {line!r}", n=number, error=exc, line=raw[:200])
        return top

    def _write(self, line: str) -> None:
        data = line.encode() + b"\n"
        os.write(self._fd, data)
        self._journal_bytes += len(data)
        if self.sync:
            os.fsync(self._fd)

    def fsync(self) -> None:
        """Make the journal durable (periodic, ASYNC_FLUSH), and rewrite it once it is too big."""
        if self._fd < 0:
            return
        if self._journal_bytes > JOURNAL_MAX_BYTES:
            self._snapshot()
        os.fsync(self._fd)

    def _snapshot(self) -> None:
        """Rewrite the journal as the live state: cursors and messages in flight."""
        lines = []
        for gt in self._state.values():
            for queue_id, cursor in gt.cursors.items():
                lines.append(f"C {gt.group} {gt.topic} {queue_id} {cursor}\n")
            for queue in gt.in_flight.values():
                lines.extend(self._delivered_line(gt, entry) + "\n" for entry in queue.values())
        tmp = self.path / "journal.new"
        data = "".join(lines).encode()
        with open(tmp, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path / "journal")
        os.close(self._fd)
        self._fd = os.open(self.path / "journal", os.O_WRONLY | os.O_APPEND)
        self._journal_bytes = len(data)

    def close(self) -> None:
        """Commit the groups' offsets and close the journal (fsynced)."""
        self.commit_offsets()
        self._alarm.close()
        if self._fd >= 0:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1

    # --- handles ----------------------------------------------------------------------------

    def _mac(self, group: str, topic: str, queue_id: int, offset: int, seq: int) -> str:
        text = f"{group}\0{topic}\0{queue_id}\0{offset}\0{seq}".encode()
        return hmac.new(self._key, text, "sha256").hexdigest()[:20]

    def handle(self, group: str, topic: str, entry: InFlight) -> str:
        """The receipt handle of ``entry``'s current delivery."""
        return f"{entry.queue_id}_{entry.offset}_{entry.seq}_{self._mac(group, topic, entry.queue_id, entry.offset, entry.seq)}"

    def _entry(self, group: str, topic: str, handle: str) -> tuple[_GroupTopic, InFlight]:
        """The message in flight ``handle`` names, or ``ReceiptRefused``."""
        parts = handle.split("_")
        try:
            if len(parts) != 4:
                raise ValueError
            queue_id, offset, seq = int(parts[0]), int(parts[1]), int(parts[2])
        except ValueError:
            raise ReceiptRefused("malformed receipt handle", expired=False) from None
        if not hmac.compare_digest(parts[3], self._mac(group, topic, queue_id, offset, seq)):
            raise ReceiptRefused("the receipt handle is not one this server gave this group and topic", expired=False)
        gt = self._state.get((group, topic))
        entry = gt.get(queue_id, offset) if gt is not None else None
        if entry is None or entry.seq != seq:
            raise ReceiptRefused("receipt handle is expired: the message was acked or delivered again", expired=True)
        if entry.visible_at <= self.wall():
            raise ReceiptRefused("receipt handle is expired: its invisible duration is over", expired=True)
        return gt, entry

    # --- receive ----------------------------------------------------------------------------

    def _group_topic(self, group: str, topic: str) -> _GroupTopic:
        gt = self._state.get((group, topic))
        if gt is None:
            gt = self._state[(group, topic)] = _GroupTopic(group, topic)
        return gt

    def take(self, receive: Receive, queue_ids: Iterable[int]) -> list[Delivery]:
        """Deliver up to ``receive.batch`` messages now: first those of the group visible again,
        then new ones from the queues in turn; past ``max_attempts`` a message goes to the DLQ."""
        gt = self._group_topic(receive.group, receive.topic)
        now = self.wall()
        out: list[Delivery] = []
        queues = list(queue_ids)
        if receive.fifo:
            self._take_fifo(gt, receive, queues, now, out)
        else:
            self._take_returned(gt, receive, now, out)
            if len(out) < receive.batch:
                self._take_new(gt, receive, queues, now, out)
        return out

    def _take_returned(self, gt: _GroupTopic, receive: Receive, now: float, out: list[Delivery]) -> None:
        due = gt.due
        while due and len(out) < receive.batch and due[0][0] <= now:
            _, seq, queue_id, offset = heapq.heappop(due)
            entry = gt.get(queue_id, offset)
            if entry is None or entry.seq != seq or entry.visible_at > now:
                continue  # stale: acked, delivered again, or moved
            self._redeliver(gt, entry, receive, now, out)

    def _redeliver(self, gt: _GroupTopic, entry: InFlight, receive: Receive, now: float, out: list[Delivery]) -> None:
        message = self.store.message_at(gt.topic, entry.queue_id, entry.offset)
        if message is None:  # gone from the store (expired files): nothing to deliver
            self._drop(gt, entry)
            return
        if entry.attempt >= receive.max_attempts:
            self._to_dlq(gt, entry, message)
            return
        key = (gt.group, gt.topic)
        self.redeliveries[key] = self.redeliveries.get(key, 0) + 1
        self._deliver(gt, entry.queue_id, entry.offset, entry.attempt + 1, message, receive, now, out)

    def _take_new(self, gt: _GroupTopic, receive: Receive, queues: list[int], now: float, out: list[Delivery]) -> None:
        if not queues:
            return
        start = gt.next_queue % len(queues)
        gt.next_queue += 1
        for queue_id in queues[start:] + queues[:start]:
            if len(out) >= receive.batch:
                return
            if gt.count() >= self.max_in_flight:
                if not out:
                    raise InvisibleFull(f"group {gt.group} has {self.max_in_flight} messages in flight on {gt.topic}")
                return
            self._read_queue(gt, queue_id, receive, now, out)

    def _read_queue(self, gt: _GroupTopic, queue_id: int, receive: Receive, now: float, out: list[Delivery]) -> None:
        """Deliver new messages of one queue from the group's cursor."""
        store = self.store
        cursor = gt.cursors.get(queue_id)
        if cursor is None:  # kept at once: a start at the queue's end must not move with the end
            cursor = self._initial_offset(gt, queue_id)
            self._cursor(gt, queue_id, cursor)
        result = store.get_message(gt.group, gt.topic, queue_id, cursor, receive.batch - len(out), receive.filter)
        status = result.status
        if status in (GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_OVERFLOW_BADLY):
            self._cursor(gt, queue_id, result.next_begin_offset)
            return
        if status not in (GetStatus.FOUND, GetStatus.NO_MATCHED_MESSAGE, GetStatus.OFFSET_FOUND_NULL):
            return
        if status == GetStatus.FOUND:
            for message in decode_messages(result.body):
                self._deliver(gt, queue_id, message.queue_offset, 1, message, receive, now, out)
        self._cursor(gt, queue_id, result.next_begin_offset)

    def _initial_offset(self, gt: _GroupTopic, queue_id: int) -> int:
        """Where a group that never received from a queue starts: its committed offset if it has
        one, else the queue's start while that is still in memory, else the queue's end (a 5.x
        broker's pop init)."""
        store = self.store
        committed = store.offsets.query(gt.group, gt.topic, queue_id)
        if committed is not None and committed >= 0:
            return committed
        first = store.min_offset(gt.topic, queue_id)
        if store.max_offset(gt.topic, queue_id) > first and store.in_disk(gt.topic, queue_id, first):
            return store.max_offset(gt.topic, queue_id)
        return first

    def _take_fifo(self, gt: _GroupTopic, receive: Receive, queues: list[int], now: float, out: list[Delivery]) -> None:
        """Orderly: per queue, the messages visible again in offset order, else new ones; a queue
        with a message still invisible gives nothing."""
        if not queues:
            return
        start = gt.next_queue % len(queues)
        gt.next_queue += 1
        for queue_id in queues[start:] + queues[:start]:
            if out:
                return  # one queue per receive keeps a batch in the queue's order
            queue = gt.in_flight.get(queue_id)
            if queue:
                if any(entry.visible_at > now for entry in queue.values()):
                    continue
                for offset in sorted(queue)[:receive.batch]:
                    self._redeliver(gt, queue[offset], receive, now, out)
                continue
            self._read_queue(gt, queue_id, receive, now, out)

    def _deliver(self, gt: _GroupTopic, queue_id: int, offset: int, attempt: int, message: Message,
                 receive: Receive, now: float, out: list[Delivery]) -> None:  # fmt: skip
        entry = InFlight(queue_id, offset, attempt, next(self._seq), now + receive.invisible_s,
                         receive.renew_for, now + RENEW_MAX_S if receive.renew_for else 0.0)  # fmt: skip
        queue = gt.in_flight.setdefault(queue_id, {})
        if offset not in queue:
            gt.size += 1
        queue[offset] = entry
        self._write(self._delivered_line(gt, entry))
        self._return_at(gt, entry)
        gt.dirty.add(queue_id)
        out.append(Delivery(message, attempt, self.handle(gt.group, gt.topic, entry), entry.visible_at))

    @staticmethod
    def _delivered_line(gt: _GroupTopic, entry: InFlight) -> str:
        line = (f"P {gt.group} {gt.topic} {entry.queue_id} {entry.offset} {entry.attempt} {entry.seq} "
                f"{round(entry.visible_at * 1000)}")  # fmt: skip
        if entry.renew_for:
            line += f" {entry.renew_for} {round(entry.renew_until * 1000)}"
        return line

    def _cursor(self, gt: _GroupTopic, queue_id: int, offset: int) -> None:
        if gt.cursors.get(queue_id) != offset:
            gt.cursors[queue_id] = offset
            self._write(f"C {gt.group} {gt.topic} {queue_id} {offset}")
            gt.dirty.add(queue_id)

    # --- ack, change, DLQ -------------------------------------------------------------------

    def ack(self, group: str, topic: str, handle: str) -> None:
        """End the message ``handle`` names (``ReceiptRefused`` if it names none in flight)."""
        gt, entry = self._entry(group, topic, handle)
        self._drop(gt, entry)

    def _drop(self, gt: _GroupTopic, entry: InFlight) -> None:
        queue = gt.in_flight[entry.queue_id]
        del queue[entry.offset]
        gt.size -= 1
        if not queue:
            del gt.in_flight[entry.queue_id]
        self._write(f"A {gt.group} {gt.topic} {entry.queue_id} {entry.offset}")
        gt.dirty.add(entry.queue_id)
        if len(gt.due) > 64 and len(gt.due) > 4 * gt.count():
            self._rebuild_due(gt)

    def change_invisible(self, group: str, topic: str, handle: str, invisible_s: float) -> tuple[str, float]:
        """Make the message visible again ``invisible_s`` from now; returns its new handle and
        that time (the old handle is stale from here on)."""
        gt, entry = self._entry(group, topic, handle)
        entry.seq = next(self._seq)
        entry.visible_at = self.wall() + invisible_s
        entry.renew_for = ""
        self._moved(gt, entry)
        return self.handle(group, topic, entry), entry.visible_at

    def forward_to_dlq(self, group: str, topic: str, handle: str) -> None:
        """Put the message ``handle`` names in the group's dead-letter queue and end it."""
        gt, entry = self._entry(group, topic, handle)
        message = self.store.message_at(topic, entry.queue_id, entry.offset)
        if message is None:
            self._drop(gt, entry)
            return
        self._to_dlq(gt, entry, message)

    def _to_dlq(self, gt: _GroupTopic, entry: InFlight, message: Message) -> None:
        if self.on_dlq is not None:
            self.on_dlq(message, dlq_topic(gt.group))
        key = (gt.group, gt.topic)
        self.dlq_forwards[key] = self.dlq_forwards.get(key, 0) + 1
        self._drop(gt, entry)

    def _rebuild_due(self, gt: _GroupTopic) -> None:
        gt.due = [(e.visible_at, e.seq, e.queue_id, e.offset) for q in gt.in_flight.values() for e in q.values()]
        heapq.heapify(gt.due)

    def receive(self, receive: Receive, queues: list[int], *, conn: Hashable, deadline: float) -> defer.Deferred:
        """Deliver now, or hold until something can be delivered or ``deadline``: a Deferred of a
        ``Received`` (``InvisibleFull`` when the group has too much in flight, ``ConnectionFull``
        when its connection holds its share already; a receive past ``maxHeldPulls`` is answered
        at once, empty, with wake ``full``, as a remoting pull is; ``GaveWay`` when, held, it
        gave way at ``maxHeldPulls`` to a connection below its fair share)."""
        arrived = self.holds.clock.seconds()
        deliveries = self.take(receive, queues)
        if deliveries or deadline <= arrived:
            return defer.succeed(Received(deliveries, WAKE_NONE, None, arrived))
        if self.holds.conn_full(conn):
            raise ConnectionFull(f"this connection already holds {self.holds.max_held_per_conn} receives "
                                 "(maxHeldPullsPerConnection); try again later")  # fmt: skip
        d: defer.Deferred = defer.Deferred()

        def reread(wake: str, final: bool) -> bool:
            now = self.holds.clock.seconds()
            if wake == WAKE_DISCONNECT:
                self.unlist(receive.group, receive.topic, held)
                d.callback(Received([], wake, arrived, now))
                return True
            if wake == WAKE_EVICTED:
                self.unlist(receive.group, receive.topic, held)
                d.errback(GaveWay(self.holds.eviction_remark, Received([], wake, arrived, now)))
                return True
            try:
                found = self.take(receive, queues)
            except InvisibleFull as full:
                self.unlist(receive.group, receive.topic, held)
                d.errback(full)
                return True
            if not found and not final:
                return False
            self.unlist(receive.group, receive.topic, held)
            d.callback(Received(found, wake, arrived, now))
            return True

        held = HeldPull(key=(receive.topic, ANY_QUEUE), offset=0,
                        matches=receive.filter.matches_arrival if receive.filter is not None else always,
                        conn=conn, reread=reread, started=arrived, deadline=deadline, group=receive.group)  # fmt: skip
        if not self.hold(receive, held):
            return defer.succeed(Received([], WAKE_FULL, None, arrived))
        d.held = held  # type: ignore[attr-defined]  # for ``cancel``
        return d

    def cancel(self, pending: defer.Deferred) -> None:
        """The client of a held receive went away (cancelled, or its deadline passed): end it
        without delivering anything."""
        held = getattr(pending, "held", None)
        if held is not None and not held.done:
            self.holds.release(held, WAKE_DISCONNECT)
            self.unlist(held.group, held.key[0], held)

    def give_back(self, group: str, topic: str, handles: Iterable[str]) -> None:
        """Messages delivered to a receive whose client was gone by then: visible again in
        ``RETURN_WHEN_GONE_S`` (as a Proxy does when it cannot write them)."""
        for handle in handles:
            try:
                self.change_invisible(group, topic, handle, RETURN_WHEN_GONE_S)
            except ReceiptRefused:
                pass

    # --- waiting receives and returns -------------------------------------------------------

    def hold(self, receive: Receive, pull: HeldPull) -> bool:
        """Hold a receive that found nothing (``HoldService.hold``), and list it for the returns
        of its group's messages."""
        if not self.holds.hold(pull):
            return False
        self._waiting.setdefault((receive.group, receive.topic), {})[pull.id] = pull
        self._topics_waited[receive.topic] = self._topics_waited.get(receive.topic, 0) + 1
        return True

    def unlist(self, group: str, topic: str, pull: HeldPull) -> None:
        """Forget a held receive that ended."""
        waiting = self._waiting.get((group, topic))
        if waiting is not None and waiting.pop(pull.id, None) is not None:
            if not waiting:
                del self._waiting[(group, topic)]
            left = self._topics_waited[topic] - 1
            if left:
                self._topics_waited[topic] = left
            else:
                del self._topics_waited[topic]

    def arrived(self, arrival: Arrival) -> None:
        """A store arrival: wake the receives waiting on its topic (the hold service's own
        listener wakes only pulls of the arrival's queue)."""
        if arrival.topic in self._topics_waited:
            self.holds.arrived(arrival._replace(queue_id=ANY_QUEUE))

    def _moved(self, gt: _GroupTopic, entry: InFlight) -> None:
        """Journal ``entry``'s new generation and visibility time, and queue its return."""
        self._write(f"V {gt.group} {gt.topic} {entry.queue_id} {entry.offset} {entry.seq} "
                    f"{round(entry.visible_at * 1000)}")  # fmt: skip
        self._return_at(gt, entry)

    def _return_at(self, gt: _GroupTopic, entry: InFlight) -> None:
        """Queue ``entry``'s return: its group's receives take it once visible (``gt.due``), and
        its waiting receives are woken then (if it is still in flight with that time)."""
        heapq.heappush(gt.due, (entry.visible_at, entry.seq, entry.queue_id, entry.offset))
        returns = self._returns
        heapq.heappush(returns, (entry.visible_at, entry.seq, gt.group, gt.topic, entry.queue_id, entry.offset))
        if returns[0][1] == entry.seq:
            self._alarm.set(entry.visible_at)
        self._pushes += 1
        if self._pushes % 4096 == 0 and len(returns) > 4 * self.in_flight():
            self._returns = [r for r in returns if self._current(r)]
            heapq.heapify(self._returns)

    def _current(self, item: tuple) -> bool:
        """Whether a queued return still names a message in flight with that visibility time."""
        visible_at, seq, group, topic, queue_id, offset = item
        gt = self._state.get((group, topic))
        entry = gt.get(queue_id, offset) if gt is not None else None
        return entry is not None and entry.seq == seq and entry.visible_at == visible_at

    def _visible_again(self) -> None:
        """The alarm: messages became visible; wake their groups' waiting receives."""
        now = self.wall()
        returns = self._returns
        woken: set[tuple[str, str]] = set()
        while returns and returns[0][0] <= now:
            item = heapq.heappop(returns)
            if self._current(item):
                woken.add((item[2], item[3]))
        for key in woken:
            for pull in list(self._waiting.get(key, {}).values()):
                self.holds.poke(pull, WAKE_RETURNED)
        self._alarm.set(returns[0][0] if returns else None)

    # --- renewals, offsets, figures ---------------------------------------------------------

    def renew(self, online: Callable[[str], bool]) -> int:
        """Renew the auto-renewed messages due within ``RENEW_AHEAD_S`` whose client is online
        (for at most ``RENEW_MAX_S`` in all); those of clients gone return in
        ``RETURN_WHEN_GONE_S``. Returns how many changed."""
        now = self.wall()

        def renewed(entry: InFlight) -> float | None:
            if entry.visible_at - now > RENEW_AHEAD_S:
                return None
            if online(entry.renew_for) and now < entry.renew_until:
                return min(now + RENEW_BY_S, entry.renew_until)
            return min(entry.visible_at, now + RETURN_WHEN_GONE_S)

        return self._move_renewed(renewed, lambda entry: True)

    def client_gone(self, client_id: str) -> int:
        """A client's session ended: its auto-renewed messages return in ``RETURN_WHEN_GONE_S``."""
        now = self.wall()
        return self._move_renewed(lambda entry: min(entry.visible_at, now + RETURN_WHEN_GONE_S),
                                  lambda entry: entry.renew_for == client_id)  # fmt: skip

    def _move_renewed(self, when: Callable[[InFlight], float | None], which: Callable[[InFlight], bool]) -> int:
        """Move the visibility of the auto-renewed messages ``which`` picks to ``when(entry)``
        (None: leave it); a message that will not be renewed again stops being renewed."""
        changed = 0
        now = self.wall()
        for gt in self._state.values():
            for queue in gt.in_flight.values():
                for entry in queue.values():
                    if not entry.renew_for or not which(entry):
                        continue
                    visible = when(entry)
                    if visible is None:
                        continue
                    if visible - now < RENEW_BY_S:
                        entry.renew_for = ""
                    if visible != entry.visible_at:
                        entry.visible_at = visible
                        self._moved(gt, entry)
                        changed += 1
        return changed

    def commit_offsets(self) -> None:
        """Bring each changed queue's committed offset to its oldest message in flight (else its
        cursor): consumer progress and lag then show what the group has not yet acked."""
        offsets = self.store.offsets
        for gt in self._state.values():
            for queue_id in gt.dirty:
                queue = gt.in_flight.get(queue_id)
                cursor = gt.cursors.get(queue_id)
                oldest = min(queue) if queue else cursor
                if oldest is not None:
                    offsets.commit(gt.group, gt.topic, queue_id, oldest)
            gt.dirty.clear()

    def in_flight(self, group: str | None = None) -> int:
        """Messages delivered and not acked (of ``group``, or all)."""
        return sum(gt.count() for (g, _), gt in self._state.items() if group is None or g == group)

    def invisible(self) -> Iterable[tuple[str, str, int]]:
        """(group, topic, messages in flight) of every group and topic with some."""
        for (group, topic), gt in self._state.items():
            count = gt.count()
            if count:
                yield group, topic, count

    def waiting(self) -> int:
        return sum(len(w) for w in self._waiting.values())


def connection_key(peer: str) -> Hashable:
    """The hold service's connection key of a gRPC peer (one HTTP/2 connection)."""
    return ("grpc", peer)


__all__ = ["ANY_QUEUE", "ConnectionFull", "Delivery", "InFlight", "InvisibleFull", "PopService", "ReceiptRefused", "Receive",
           "Received", "connection_key"]  # fmt: skip
