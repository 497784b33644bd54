"""Rebalance locks for orderly consumers: one owner client per (group, queue) (docs/protocol.md, Locks).

Semantics of RocketMQ's ``RebalanceLockManager`` (4.9.8): a lock is granted when the queue is
free, expired (``max_live_s`` after its last renewal) or already the caller's (which renews it);
an unlock releases only the caller's locks. Added here, to remove the 60 s stall after a consumer
dies (issue 8):

- UNREGISTER_CLIENT releases the client's locks at once (it has stopped consuming).
- When a client's last connection closes, ``safe`` mode releases its locks at its last renewal
  + 31 s: the Java client stops consuming a queue 30 s after its last successful lock
  (``ProcessQueue``), so even a client cut off by a partition cannot still be consuming.
  ``immediate`` mode releases at once (a dropped connection means a dead process). A client that
  reconnects before then keeps its locks (the pending release is cancelled).
- Whenever a queue is freed while another member of the group asked for it and was refused,
  ``on_free(group)`` fires so the server can notify the group; the next owner then locks at once
  instead of on its 20 s rebalance tick. Release → grant time is recorded (``handoffs``).

Time comes from the injected clock; each pending release is one ``callLater`` (no sweep).
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Hashable, Iterable

from twisted.internet.interfaces import IDelayedCall, IReactorTime

from codec.bodies import MessageQueue

#: The Java client treats its own lock as expired 30 s after the last successful renewal
#: (``rocketmq.client.rebalance.lockMaxLiveTime``); one more second covers clock skew and the
#: renewal's own round trip.
CLIENT_LOCK_LIVE_S = 30.0
SAFETY_MARGIN_S = 1.0


@dataclasses.dataclass
class LockEntry:
    client_id: str
    last_update: float


@dataclasses.dataclass
class LockStats:
    """Counters the metrics module exports."""

    requests: dict[tuple[str, str, str], int] = dataclasses.field(default_factory=dict)  # (group, op, outcome)
    # (group, seconds) of the most recent handoffs; bounded, for tests and benchmarks
    handoffs: collections.deque = dataclasses.field(default_factory=lambda: collections.deque(maxlen=1000))

    def count(self, group: str, op: str, outcome: str) -> None:
        key = (group, op, outcome)
        self.requests[key] = self.requests.get(key, 0) + 1


class LockManager:
    def __init__(
        self,
        clock: IReactorTime,
        *,
        max_live_s: float = 60.0,
        release_on_disconnect: str = "safe",
        on_free: Callable[[str], None] | None = None,
        on_handoff: Callable[[str, float], None] | None = None,
    ) -> None:
        if release_on_disconnect not in ("safe", "immediate"):
            raise ValueError(f"release_on_disconnect must be safe or immediate, not {release_on_disconnect!r}")
        self.clock = clock
        self.max_live_s = max_live_s
        self.release_on_disconnect = release_on_disconnect
        self.on_free = on_free
        self.on_handoff = on_handoff
        self.tables: dict[str, dict[MessageQueue, LockEntry]] = {}
        self._wanted: dict[tuple[str, MessageQueue], float] = {}  # refused request → first refusal time
        self._freed_at: dict[tuple[str, MessageQueue], tuple[float, str]] = {}  # → (when, by whom)
        self._connections: dict[str, set[Hashable]] = {}  # client id → live connections
        self._pending: dict[str, IDelayedCall] = {}  # client id → scheduled release
        self.stats = LockStats()

    # --- requests ---------------------------------------------------------------------------

    def lock(
        self, group: str, client_id: str, mqs: Iterable[MessageQueue], conn: Hashable = None
    ) -> list[MessageQueue]:
        """Grant what can be granted; return every queue of ``mqs`` the client now holds."""
        now = self.clock.seconds()
        mqs = list(mqs)
        if conn is not None:
            self._connections.setdefault(client_id, set()).add(conn)
        self._cancel_release(client_id)
        table = self.tables.setdefault(group, {})
        held = []
        for mq in mqs:
            entry = table.get(mq)
            if entry is None or entry.client_id == client_id or now - entry.last_update > self.max_live_s:
                if entry is None or entry.client_id != client_id:
                    self._granted(group, mq, now, client_id)
                table[mq] = LockEntry(client_id, now)
                held.append(mq)
            else:
                self._wanted.setdefault((group, mq), now)
        outcome = "granted" if len(held) == len(mqs) else ("partial" if held else "refused")
        self.stats.count(group, "lock", outcome)
        return held

    def unlock(self, group: str, client_id: str, mqs: Iterable[MessageQueue]) -> None:
        """Release the caller's locks among ``mqs`` (others' locks are left alone)."""
        table = self.tables.get(group, {})
        released = [mq for mq in mqs if mq in table and table[mq].client_id == client_id]
        for mq in released:
            del table[mq]
        self.stats.count(group, "unlock", "released" if released else "none")
        self._freed(group, released, client_id)

    def locked_queues(self, group: str) -> int:
        """Queues of ``group`` locked and not expired now (gauge)."""
        now = self.clock.seconds()
        return sum(1 for e in self.tables.get(group, {}).values() if now - e.last_update <= self.max_live_s)

    def owner(self, group: str, mq: MessageQueue) -> str | None:
        entry = self.tables.get(group, {}).get(mq)
        if entry is None or self.clock.seconds() - entry.last_update > self.max_live_s:
            return None
        return entry.client_id

    # --- client lifecycle ---------------------------------------------------------------------

    def client_unregistered(self, client_id: str, group: str | None = None) -> None:
        """UNREGISTER_CLIENT: the client stopped consuming; free its locks now."""
        self._cancel_release(client_id)
        self._release_client(client_id, group)

    def connection_closed(self, conn: Hashable) -> None:
        """A connection closed: when it was a client's last, schedule (or do) the release."""
        for client_id, conns in list(self._connections.items()):
            if conn not in conns:
                continue
            conns.discard(conn)
            if conns:
                continue
            del self._connections[client_id]
            if self.release_on_disconnect == "immediate":
                self._release_client(client_id, None)
            else:
                renewals = [e.last_update for t in self.tables.values() for e in t.values() if e.client_id == client_id]
                last = max(renewals, default=None)
                if last is None:
                    continue
                delay = max(0.0, last + CLIENT_LOCK_LIVE_S + SAFETY_MARGIN_S - self.clock.seconds())
                self._pending[client_id] = self.clock.callLater(delay, self._safe_release, client_id)

    def _safe_release(self, client_id: str) -> None:
        self._pending.pop(client_id, None)
        if client_id not in self._connections:  # still gone
            self._release_client(client_id, None)

    def _cancel_release(self, client_id: str) -> None:
        call = self._pending.pop(client_id, None)
        if call is not None and call.active():
            call.cancel()

    def _release_client(self, client_id: str, group: str | None) -> None:
        for name, table in self.tables.items():
            if group is not None and name != group:
                continue
            released = [mq for mq, entry in table.items() if entry.client_id == client_id]
            for mq in released:
                del table[mq]
            self._freed(name, released, client_id)

    # --- handoff ----------------------------------------------------------------------------

    def _freed(self, group: str, mqs: list[MessageQueue], by: str) -> None:
        now = self.clock.seconds()
        wanted = False
        for mq in mqs:
            self._freed_at[(group, mq)] = (now, by)
            wanted = wanted or (group, mq) in self._wanted
        if wanted and self.on_free is not None:
            self.on_free(group)

    def _granted(self, group: str, mq: MessageQueue, now: float, to: str) -> None:
        self._wanted.pop((group, mq), None)
        freed = self._freed_at.pop((group, mq), None)
        if freed is not None and freed[1] != to:  # a client taking back its own queue is no handoff
            self.stats.handoffs.append((group, now - freed[0]))
            if self.on_handoff is not None:
                self.on_handoff(group, now - freed[0])

    def close(self) -> None:
        for call in self._pending.values():
            if call.active():
                call.cancel()
        self._pending.clear()
