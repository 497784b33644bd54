"""The hold service: pulls that found nothing wait for a message or their own deadline.

RocketMQ's broker sweeps held pulls on a 5 s tick, so a 15 s hold ends after 15-20 s. Here the
deadlines of held pulls sit in a heap, and one alarm (``rmqproxy.core.alarm``: a timerfd under a real
reactor, to the microsecond) is set for the earliest; arrivals wake the pulls of their queue at
once. Deadlines are times on the reactor's clock, which is monotonic (``core.clocks``): a
wall-clock step ends no hold early or late. Completion cases of a held pull, each ending it
exactly once:

A. arrival: a message for its queue at or past its offset that its filter matches (tag hash, or an
   SQL92 selector over its properties); the
   read is re-run and answered if it finds something, else the pull keeps holding (same deadline);
B. timeout: its deadline passed; the read is re-run once and answered, whatever it finds;
C. disconnect: its connection closed; it is dropped silently (nobody to answer);
D. shutdown: the server stops; the read is re-run and answered;
E. evicted: at ``max_held``, a pull came from a connection below its fair share (below): the
   newest held pull of the connection holding the most is ended with a final re-read (wake
   ``evicted``; ``eviction_remark`` says why), which its caller answers "busy" (remoting
   SYSTEM_BUSY, gRPC TOO_MANY_REQUESTS), so its client backs off instead of pulling again at once.

Every completion first takes the pull out of the tables and its deadline entry, then re-reads: a
re-read that re-enters the service (an answer whose write closes the connection) finds the pull
already gone, so it is answered once. An arrival whose re-read finds nothing puts the pull back,
with the deadline it had. A re-read that raises is logged and counted (``failures``), the pull is
dropped, and the arrival goes on to the other pulls.

``max_held_per_conn`` bounds what one connection may hold (``conn_full``; its caller refuses the
pull). ``max_held`` bounds them all, and is shared fairly: a connection's fair share is
``max_held`` divided by the number of connections holding pulls (the puller's counted). At
``max_held`` a pull from a connection below its share is held and the connection holding the most
gives way (case E); any other pull is not held, and its caller answers at once, as it does every
pull once the service is shut down. The one holding the most is then always above its share, but
it gives way only if it holds at least two more than the puller, so two connections never pass a
slot back and forth. It is found in O(1), never by a scan over connections or pulls: connections
are kept in buckets by how many pulls they hold, with the highest count, and each pull held or
ended moves its connection one bucket (``_one_more``, ``_one_fewer``). "Newest" is the pull last
put in its connection's table: one an arrival woke to find nothing, put back, counts as new.

Held pulls are keyed by (topic, queue id); the table never keeps an entry for a queue with no held
pull. A completed pull's heap entry stays until its time comes or the heap is compacted (more than
half stale), but no longer refers to the pull.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable
from typing import Any, NamedTuple

from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from .alarm import Alarm, ClockAlarm

log = Logger()


class Arrival(NamedTuple):
    """What arrival listeners receive for each message that just became readable (a tuple: one
    is made per stored message, at a quarter of a frozen dataclass's cost)."""

    topic: str
    queue_id: int
    queue_offset: int
    tags_code: int
    store_timestamp: int
    properties: dict[str, str]


WAKE_NONE = "none"
WAKE_ARRIVAL = "arrival"
WAKE_TIMEOUT = "timeout"
WAKE_DISCONNECT = "disconnect"
WAKE_SHUTDOWN = "shutdown"
WAKE_UPSTREAM = "upstream"  # proxy mode: the upstream broker answered a pull it had held
WAKE_RETURNED = "returned"  # a gRPC receive: a message of its group became visible again
WAKE_FULL = "full"  # a gRPC receive past the held-pull bounds, answered empty at once
WAKE_EVICTED = "evicted"  # at maxHeldPulls: gave way to a pull of a connection below its fair share


class HeldPull:
    """One waiting pull. ``reread(wake, final)`` re-runs the read; it returns True when it answered
    (always when ``final``), False to keep holding."""

    __slots__ = ("id", "key", "offset", "matches", "conn", "reread", "deadline", "started", "entry", "done", "group")

    def __init__(
        self,
        *,
        key: tuple[str, int],
        offset: int,
        matches: Callable[[Arrival], bool],
        conn: Hashable,
        reread: Callable[[str, bool], bool],
        started: float,
        deadline: float,
        group: str = "",
    ) -> None:
        self.id = 0
        self.group = group
        self.key = key
        self.offset = offset
        self.matches = matches
        self.conn = conn
        self.reread = reread
        self.started = started
        self.deadline = deadline
        self.entry: list | None = None  # [deadline, seq, pull] in the service's heap while held
        self.done = False


class HoldService:
    def __init__(
        self,
        clock: IReactorTime,
        max_held: int = 100_000,
        max_held_per_conn: int = 10_000,
        alarm: Callable[[Callable[[], None]], Alarm] | None = None,
    ) -> None:
        self.clock = clock
        self._make_alarm = alarm or (lambda fire: ClockAlarm(clock, fire))
        self._alarm: Alarm | None = None  # made at the first hold: a server that holds nothing opens no timerfd
        self._deadlines: list[list] = []  # heap of [deadline, seq, pull or None once it completed]
        self._stale = 0
        self._seq = itertools.count()
        self.max_held = max_held
        self.max_held_per_conn = max_held_per_conn
        self._held: dict[tuple[str, int], dict[int, HeldPull]] = {}
        self._by_conn: dict[Hashable, dict[int, HeldPull]] = {}
        # connections by how many pulls they hold (count -> those connections, as a dict for its
        # order) and the highest such count: the connection holding the most in O(1) (case E)
        self._conns_holding: dict[int, dict[Hashable, None]] = {}
        self._most = 0
        self.eviction_remark = ""  # why the last evicted pull was ended: its re-read answers with it
        self._ids = itertools.count(1)
        self.count = 0
        self.wakeups: dict[str, int] = {}
        self.failures = 0  # re-reads that raised
        self.closed = False  # shut down: pulls are no longer held

    def held_by(self, conn: Hashable) -> int:
        """How many pulls ``conn`` has held now."""
        return len(self._by_conn.get(conn, ()))

    def conn_full(self, conn: Hashable) -> bool:
        """Whether ``conn`` already holds ``max_held_per_conn`` pulls."""
        return len(self._by_conn.get(conn, ())) >= self.max_held_per_conn

    def hold(self, pull: HeldPull) -> bool:
        """Start holding ``pull`` until its deadline; False (not held) when its connection is
        full, at ``max_held`` unless its connection is below its fair share (then another
        connection's pull gives way, case E), or once shut down (nothing would answer it)."""
        if self.closed or self.conn_full(pull.conn):
            return False
        victim = None
        if self.count >= self.max_held:
            victim = self._over_share(pull.conn)
            if victim is None:
                return False
            self._remove(victim)  # out before the new pull is in: never more than ``max_held`` held
        pull.id = next(self._ids)
        self._insert(pull)
        if victim is not None:
            self._reread(victim, WAKE_EVICTED, True)
            self._count(WAKE_EVICTED)
        return True

    def _over_share(self, conn: Hashable) -> HeldPull | None:
        """At ``max_held``: the pull to end for one of ``conn``, or None. ``conn`` must be below
        its fair share and the connection holding the most must hold two more than ``conn``
        (then it is above its share); it gives its newest pull. O(1): no scan."""
        mine = len(self._by_conn.get(conn, ()))
        conns = len(self._by_conn) + (0 if mine else 1)
        if mine * conns >= self.max_held or self._most < mine + 2:
            return None
        hog = next(iter(self._conns_holding[self._most]))  # the first to reach that count
        pulls = self._by_conn[hog]
        victim = pulls[next(reversed(pulls))]
        self.eviction_remark = (
            f"{self.count} pulls are held (maxHeldPulls {self.max_held}) and this connection holds {self._most}, "
            f"over its fair share of {self.max_held // conns} (maxHeldPulls / {conns} connections holding pulls); "
            "try again later"
        )
        return victim

    def _one_more(self, conn: Hashable, n: int) -> None:
        """``conn`` holds ``n`` pulls now, one more than before: up one bucket."""
        buckets = self._conns_holding
        if n > 1:
            below = buckets[n - 1]
            del below[conn]
            if not below:
                del buckets[n - 1]
        above = buckets.get(n)
        if above is None:
            buckets[n] = {conn: None}
            if n > self._most:
                self._most = n
        else:
            above[conn] = None

    def _one_fewer(self, conn: Hashable, n: int) -> None:
        """``conn`` holds ``n`` pulls now, one fewer than before: down one bucket."""
        buckets = self._conns_holding
        above = buckets[n + 1]
        del above[conn]
        if not above:
            del buckets[n + 1]
            if self._most == n + 1:
                self._most = n  # it was the last at the top: ``conn`` is at the top now (or none is, at 0)
        if n:
            below = buckets.get(n)
            if below is None:
                buckets[n] = {conn: None}
            else:
                below[conn] = None

    def _insert(self, pull: HeldPull) -> None:
        pull.done = False
        self._held.setdefault(pull.key, {})[pull.id] = pull
        by_conn = self._by_conn.setdefault(pull.conn, {})
        by_conn[pull.id] = pull
        self._one_more(pull.conn, len(by_conn))
        self.count += 1
        pull.entry = entry = [pull.deadline, next(self._seq), pull]
        heap = self._deadlines
        heapq.heappush(heap, entry)
        if heap[0] is entry:
            self._arm()

    def _arm(self) -> None:
        """Set the alarm for the earliest live deadline (dropping stale entries on top)."""
        heap = self._deadlines
        while heap and heap[0][2] is None:
            heapq.heappop(heap)
            self._stale -= 1
        if self._alarm is None:
            if not heap:
                return
            self._alarm = self._make_alarm(self._expire_due)
        self._alarm.set(heap[0][0] if heap else None)

    def _expire_due(self) -> None:
        """The alarm fired: end every pull whose deadline has come (case B), then re-arm."""
        heap = self._deadlines
        now = self.clock.seconds()
        while heap and heap[0][0] <= now:
            pull = heapq.heappop(heap)[2]
            if pull is None:
                self._stale -= 1
            elif not pull.done:
                self._complete(pull, WAKE_TIMEOUT)
        self._arm()

    def held(self, key: tuple[str, int] | None = None) -> list[HeldPull]:
        if key is not None:
            return list(self._held.get(key, {}).values())
        return [p for pulls in self._held.values() for p in pulls.values()]

    def arrived(self, arrival: Arrival) -> None:
        """A message became readable: wake the held pulls of its queue it can satisfy (case A)."""
        pulls = self._held.get((arrival.topic, arrival.queue_id))
        if not pulls:
            return
        for pull in list(pulls.values()):
            if not (pull.done or pull.offset > arrival.queue_offset or not pull.matches(arrival)):
                self.poke(pull, WAKE_ARRIVAL)

    def poke(self, pull: HeldPull, wake: str) -> None:
        """Re-run a held pull's read for a reason other than an arrival of its queue (a gRPC
        receive: a message of its group visible again); it holds on if that finds nothing."""
        if pull.done:
            return
        self._remove(pull)
        if self._reread(pull, wake, False):
            self._count(wake)
        else:
            self._insert(pull)  # nothing for it after all: hold on, to the same deadline

    def release(self, pull: HeldPull, wake: str) -> None:
        """End ``pull`` without a re-read: its answer came from elsewhere (proxy mode: the
        upstream broker answered it)."""
        if not pull.done:
            self._remove(pull)
            self._count(wake)

    def connection_closed(self, conn: Hashable) -> int:
        """Drop every pull held for ``conn`` (case C); returns how many."""
        pulls = list(self._by_conn.get(conn, {}).values())
        for pull in pulls:
            self._complete(pull, WAKE_DISCONNECT)
        return len(pulls)

    def shutdown(self) -> None:
        """Answer every held pull now (case D), close the alarm, and hold nothing more: a client
        that pulls again at once on its answer must get an answer too, not a wait for its own
        pull timeout on a connection about to close."""
        self.closed = True
        for pull in self.held():
            if not pull.done:
                self._complete(pull, WAKE_SHUTDOWN)
        if self._alarm is not None:
            self._alarm.close()
            self._alarm = None

    def _complete(self, pull: HeldPull, wake: str) -> None:
        """End ``pull`` with a final re-read (cases B, C and D)."""
        self._remove(pull)
        self._reread(pull, wake, True)
        self._count(wake)

    def _reread(self, pull: HeldPull, wake: str, final: bool) -> bool:
        """``pull.reread``, guarded: one that raises is logged, counted and ends the pull."""
        try:
            return pull.reread(wake, final)
        except Exception:
            self.failures += 1
            log.failure("a held pull of {group} on {key} failed on {wake}", group=pull.group, key=pull.key, wake=wake)
            return True

    def _remove(self, pull: HeldPull) -> None:
        """Take ``pull`` out of the tables and out of its heap entry (the entry goes later)."""
        pull.done = True
        entry = pull.entry
        if entry is not None:
            pull.entry = None
            entry[2] = None
            self._stale += 1
        pulls = self._held.get(pull.key)
        if pulls is not None and pulls.pop(pull.id, None) is not None:
            self.count -= 1
            if not pulls:
                del self._held[pull.key]
        by_conn = self._by_conn.get(pull.conn)
        if by_conn is not None and by_conn.pop(pull.id, None) is not None:
            self._one_fewer(pull.conn, len(by_conn))
            if not by_conn:
                del self._by_conn[pull.conn]
        if self.count == 0:  # nothing held: no entry and no alarm left behind
            self._deadlines.clear()
            self._stale = 0
            if self._alarm is not None:
                self._alarm.set(None)
        elif self._stale > 64 and self._stale * 2 > len(self._deadlines):
            self._compact()

    def _compact(self) -> None:
        """Rebuild the heap without the entries of completed pulls (arrivals complete most)."""
        self._deadlines[:] = [entry for entry in self._deadlines if entry[2] is not None]  # in place: a
        heapq.heapify(self._deadlines)  # running ``_expire_due`` holds the list
        self._stale = 0

    def _count(self, wake: str) -> None:
        self.wakeups[wake] = self.wakeups.get(wake, 0) + 1


def always(_arrival: Arrival) -> bool:
    return True


__all__: list[Any] = ["HeldPull", "HoldService", "always"]
