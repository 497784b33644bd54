"""Pulls through the proxy: exact deadlines in front of a broker that answers late, measured.

An Apache broker checks its held pulls' deadlines every 5 s, so a pull that asked to be held
15 s comes back after 15-20 s. The proxy answers the client PULL_NOT_FOUND at its own deadline
(``suspendTimeoutMillis`` after the pull arrived; the ``HoldService`` alarm), but the upstream
broker still holds the pull it was sent, and cannot be told to drop it. So each (group, topic,
queue) of a session is a ``Slot`` with at most one live upstream pull:

- A client pull for the offset the live upstream pull asked for is attached to it instead of
  being sent again: the client's retry after a deadline costs the broker nothing.
- An upstream answer that comes after its client was answered at the deadline is kept (the
  slot's ``stash``) when it carries messages, and is the answer to the client's next pull of that
  same offset, which follows at once. Nothing is lost (the client was told "nothing yet" and asks
  again from the same offset) and nothing is delivered twice (a stash serves one pull of exactly
  its offset, and is dropped when the client asks for any other).
- A pull for another offset retires the live one (its answer, when it comes, is dropped) and is
  sent. An upstream PULL_NOT_FOUND while its client still has more than a second left sends the
  same pull again, at most ten times a second; with less left, the client waits for its deadline.

Stashes are bounded (``MAX_STASH_BYTES`` in all, ``STASH_TTL_S`` each); a dropped one costs only a
pull. Every client pull gives one ``PullEvent``: a deadline answer is a hold of exactly the time
the client asked for (wake ``timeout``); an upstream answer to a suspended pull that took longer
than the broker's usual service time (``Node.service_ms``, from the other requests' round trips)
counts as held upstream (wake ``upstream``), the rest as service.
"""

from __future__ import annotations

import functools
from typing import Any, Protocol

from twisted.internet import defer
from twisted.logger import Logger

from codec.codes import ResponseCode
from codec.command import RemotingCommand
from codec.errors import CodecError
from codec.headers import PullMessageRequestHeader

from ..core.hold import WAKE_DISCONNECT, WAKE_EVICTED, WAKE_NONE, WAKE_SHUTDOWN, WAKE_UPSTREAM, HeldPull, always
from ..net.rejects import OVER_FAIR_SHARE
from ..observe.pull_events import PullEvent, suspend_ms
from ..net.transport import Connection
from .nodes import Node
from .shared import Relaying
from .upstream import LazyConnection, ask, relabel

log = Logger()

STASH_TTL_S = 30.0
#: An upstream pull for a client still waiting is sent again no sooner than this after the last,
REPULL_INTERVAL_S = 0.1
#: and only while the client has this long left: a broker answers the pulls it held on its 5 s
#: tick, all at once, and re-sending them all just then would delay the deadline answers around it.
REPULL_MIN_LEFT_S = 1.0
#: How long past its suspend time an upstream pull may take (the broker's 5 s tick, and more).
UPSTREAM_PULL_GRACE_S = 30.0

_HEADER = PullMessageRequestHeader.CODEC


class ClientPull:
    """One pull of the client, until it is answered."""

    __slots__ = ("request", "header", "arrived", "held", "answered", "d", "suspend_ms")

    def __init__(self, request: RemotingCommand, header: Any, arrived: float) -> None:
        self.request = request
        self.header = header
        self.arrived = arrived
        self.held: HeldPull | None = None  # its deadline in the hold service
        self.answered = False
        self.d: Any = None
        self.suspend_ms = suspend_ms(header)


class UpstreamPull:
    """A pull sent to the broker, until it answers."""

    __slots__ = ("offset", "sent", "waiter", "retired")

    def __init__(self, offset: int, sent: float, waiter: ClientPull) -> None:
        self.offset = offset
        self.sent = sent
        self.waiter: ClientPull | None = waiter
        self.retired = False


class Slot:
    """A (group, topic, queue) of one session: its live upstream pull, and a kept late answer."""

    __slots__ = ("key", "live", "stash", "stash_at", "suggest", "min_offset", "max_offset")

    def __init__(self, key: tuple[str, str, int]) -> None:
        self.key = key
        self.live: UpstreamPull | None = None
        self.stash: tuple[int, RemotingCommand] | None = None
        self.stash_at = 0.0
        self.suggest = "0"
        self.min_offset = "0"
        self.max_offset = 0


class PullSession(Protocol):
    """What a ``PullRelay`` needs of its session (``session.BrokerSession``)."""

    client: Connection
    node: Node
    client_id: str
    link: LazyConnection

    def forward(self, request: RemotingCommand) -> Any: ...

    def failed(self, failure: Any, request: RemotingCommand) -> RemotingCommand: ...


class PullRelay:
    """The pulls of one session."""

    def __init__(self, session: PullSession, shared: Relaying) -> None:
        self.session = session
        self.shared = shared
        self.clock = shared.clock
        self.slots: dict[tuple[str, str, int], Slot] = {}
        self.outstanding = 0  # upstream pulls sent and not yet answered, retired ones included

    def pull(self, request: RemotingCommand) -> Any:
        """Answer from a kept late answer, or attach to the live upstream pull, or send one."""
        try:
            header = _HEADER.decode(request.ext_fields)
        except CodecError:
            return self.session.forward(request)  # the broker says what is wrong with it
        pull = ClientPull(request, header, self.clock.seconds())
        key = (header.consumer_group, header.topic, header.queue_id)
        slot = self.slots.get(key)
        if slot is not None and slot.stash is not None:
            answer = self._take_stash(slot, header.queue_offset)
            if answer is not None:
                return self._finish(pull, relabel(answer, request.opaque), WAKE_NONE, None)
        if not pull.suspend_ms:  # answered at once by the broker: nothing to hold or keep
            d = self.session.link.get().addCallback(ask, request, self.shared.timeout_s)
            return d.addCallbacks(self._answered_now, self._failed_now, callbackArgs=(pull,), errbackArgs=(pull,))
        holds = self.shared.holds
        if holds.closed:  # stopping: nothing is held any more, and the client pulls again elsewhere
            return self._not_found(slot or Slot(key), pull, WAKE_SHUTDOWN)
        if holds.conn_full(self.session.client) or self.outstanding >= holds.max_held_per_conn:
            return request.response(
                ResponseCode.SYSTEM_BUSY,
                f"this connection already holds {holds.max_held_per_conn} pulls (maxHeldPullsPerConnection); "
                "try again later",
            )
        if slot is None:
            slot = self.slots[key] = Slot(key)
        pull.d = d = defer.Deferred()
        live = slot.live
        if live is not None and live.offset == header.queue_offset and live.waiter is None:
            live.waiter = pull  # the broker still holds a pull for this offset: wait on it
        else:
            if live is not None:
                live.retired = True  # another offset: that answer is for nobody now
                if live.waiter is not None:
                    live.waiter = None  # (its client is answered at its own deadline)
            self._send(slot, pull)
        suspend_s = min(pull.suspend_ms / 1000, self.shared.max_suspend_s)
        held = HeldPull(
            key=(header.topic, header.queue_id), offset=header.queue_offset, matches=always,
            conn=self.session.client, reread=functools.partial(self._deadline, slot, pull), started=pull.arrived,
            deadline=pull.arrived + suspend_s, group=header.consumer_group,
        )  # fmt: skip
        if holds.hold(held):
            pull.held = held
        return d

    # --- upstream ---------------------------------------------------------------------------

    def _send(self, slot: Slot, pull: ClientPull) -> None:
        up = UpstreamPull(pull.header.queue_offset, self.clock.seconds(), pull)
        slot.live = up
        self.outstanding += 1
        timeout_s = pull.suspend_ms / 1000 + UPSTREAM_PULL_GRACE_S
        d = self.session.link.get().addCallback(ask, pull.request, timeout_s)
        d.addCallbacks(self._upstream_answer, self._upstream_failed, callbackArgs=(slot, up), errbackArgs=(slot, up))

    def _upstream_answer(self, answer: RemotingCommand, slot: Slot, up: UpstreamPull) -> None:
        self.outstanding -= 1
        if slot.live is up:
            slot.live = None
        ext = answer.ext_fields or {}
        slot.suggest = ext.get("suggestWhichBrokerId", slot.suggest)
        slot.min_offset = ext.get("minOffset", slot.min_offset)
        try:
            slot.max_offset = int(ext.get("maxOffset", slot.max_offset))
        except ValueError:
            pass
        pull = up.waiter
        if up.retired or pull is None or pull.answered:
            if answer.code == ResponseCode.SUCCESS and answer.body and not up.retired:
                self._keep(slot, up.offset, answer)
            self._tidy(slot)
            return
        if answer.code == ResponseCode.PULL_NOT_FOUND and pull.held is not None:
            # The broker's hold ended before the client's deadline: ask again for the rest, unless
            # little is left (the client's own next pull follows its deadline answer at once).
            now = self.clock.seconds()
            if pull.held.deadline - now < REPULL_MIN_LEFT_S:
                self._tidy(slot)
                return
            delay = max(0.0, REPULL_INTERVAL_S - (now - up.sent))
            slot.live = up  # still counts as live until the new one leaves
            self.clock.callLater(delay, self._repull, slot, up, pull)
            return
        self._finish(pull, relabel(answer, pull.request.opaque), WAKE_UPSTREAM, up)
        self._tidy(slot)

    def _repull(self, slot: Slot, up: UpstreamPull, pull: ClientPull) -> None:
        if slot.live is up:
            slot.live = None
        if not pull.answered and not self.session.link.closed:
            self._send(slot, pull)

    def _upstream_failed(self, failure: Any, slot: Slot, up: UpstreamPull) -> None:
        self.outstanding -= 1
        if slot.live is up:
            slot.live = None
        pull = up.waiter
        if not (up.retired or pull is None or pull.answered):
            self._finish(pull, self.session.failed(failure, pull.request), WAKE_NONE, up)
        self._tidy(slot)

    def _tidy(self, slot: Slot) -> None:
        """Forget a slot with nothing live and nothing kept (a client may pull any name)."""
        if slot.live is None and slot.stash is None and self.slots.get(slot.key) is slot:
            del self.slots[slot.key]

    # --- the stash --------------------------------------------------------------------------

    def _keep(self, slot: Slot, offset: int, answer: RemotingCommand) -> None:
        """An answer that came after its client was answered: the next pull of ``offset`` gets it."""
        self._drop_stash(slot)
        if not self.shared.stash.take(len(answer.body)):
            return  # the client pulls it again: costs a pull, loses nothing
        slot.stash = (offset, answer)
        slot.stash_at = self.clock.seconds()

    def _take_stash(self, slot: Slot, offset: int) -> RemotingCommand | None:
        kept_offset, answer = slot.stash  # type: ignore[misc]
        fresh = self.clock.seconds() - slot.stash_at < STASH_TTL_S
        self._drop_stash(slot)
        return answer if kept_offset == offset and fresh else None

    def _drop_stash(self, slot: Slot) -> None:
        if slot.stash is not None:
            self.shared.stash.give(len(slot.stash[1].body))
            slot.stash = None

    # --- answers ----------------------------------------------------------------------------

    def _deadline(self, slot: Slot, pull: ClientPull, wake: str, final: bool) -> bool:
        """The hold service ended ``pull``: its deadline (answer PULL_NOT_FOUND), the proxy's
        shutdown (the same), its client's disconnect (nobody to answer), or its giving way at
        ``maxHeldPulls`` (SYSTEM_BUSY; the broker's answer, if it brings messages, is kept)."""
        if pull.answered:
            return True
        live = slot.live
        if live is not None and live.waiter is pull:
            live.waiter = None  # the broker's answer, if it brings messages, is kept for the next pull
        pull.held = None
        if wake == WAKE_DISCONNECT:
            pull.answered = True
            self._emit(pull, None, wake, pull.arrived)
            return True
        if wake == WAKE_EVICTED:
            busy = pull.request.response(ResponseCode.SYSTEM_BUSY, self.shared.holds.eviction_remark)
            self.shared.rejected(OVER_FAIR_SHARE, "a held pull from {conn} answered SYSTEM_BUSY: {remark}",
                                 conn=self.session.client.remote, remark=busy.remark)  # fmt: skip
            self._finish(pull, busy, wake, None)
            return True
        self._not_found(slot, pull, wake)
        return True

    def _not_found(self, slot: Slot, pull: ClientPull, wake: str) -> RemotingCommand:
        """Answer ``pull`` PULL_NOT_FOUND at its own offset, with what the broker last said of the queue."""
        offset = pull.header.queue_offset
        ext = {
            "suggestWhichBrokerId": slot.suggest,
            "nextBeginOffset": str(offset),
            "minOffset": slot.min_offset,
            "maxOffset": str(max(offset, slot.max_offset)),
        }
        answer = pull.request.response(ResponseCode.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE", ext)
        return self._finish(pull, answer, wake, None)

    def _answered_now(self, answer: RemotingCommand, pull: ClientPull) -> RemotingCommand:
        """A pull that asked not to be held, relayed."""
        return self._finish(pull, relabel(answer, pull.request.opaque), WAKE_NONE, None)

    def _failed_now(self, failure: Any, pull: ClientPull) -> RemotingCommand:
        return self._finish(pull, self.session.failed(failure, pull.request), WAKE_NONE, None)

    def _finish(self, pull: ClientPull, answer: RemotingCommand, wake: str, up: UpstreamPull | None) -> RemotingCommand:
        """Answer ``pull`` (once) and tell the listeners how it went."""
        pull.answered = True
        if pull.held is not None:
            self.shared.holds.release(pull.held, wake)
            pull.held = None
        if up is not None:
            self._emit(pull, answer, wake, max(up.sent, pull.arrived))
        else:
            self._emit(pull, answer, wake, pull.arrived)
        if pull.d is not None:
            pull.d.callback(answer)
        return answer

    def _emit(self, pull: ClientPull, answer: RemotingCommand | None, wake: str, since: float) -> None:
        """One ``PullEvent``: hold time is what the client's deadline or the broker's hold took,
        service time the rest."""
        now = self.clock.seconds()
        total_ms = (now - pull.arrived) * 1000
        node = self.session.node
        if wake == WAKE_UPSTREAM:
            waited_ms = (now - since) * 1000
            service = node.service_ms
            held = waited_ms > 2 * service + 1.0  # more than a round trip's noise: the broker held it
            hold_ms = waited_ms - service if held else 0.0
            if not held:
                wake = WAKE_NONE
        elif wake == WAKE_NONE:
            held, hold_ms = False, 0.0
        else:  # timeout, shutdown, disconnect: held by the proxy from arrival
            held = True
            hold_ms = min(total_ms, pull.suspend_ms) if wake != WAKE_DISCONNECT else total_ms
        event = PullEvent.of_pull(pull.header, answer, arrived=pull.arrived, done=now,
                                  done_ms=int(self.shared.wall() * 1000), held=held, hold_ms=hold_ms,
                                  wake=wake, mode="long", client_id=self.session.client_id,
                                  remote=self.session.client.remote)  # fmt: skip
        self.shared.pulled(node, event)

    def sweep(self) -> None:
        """Drop kept answers older than ``STASH_TTL_S`` (their client did not come back for them)."""
        now = self.clock.seconds()
        for slot in list(self.slots.values()):
            if slot.stash is not None and now - slot.stash_at >= STASH_TTL_S:
                self._drop_stash(slot)
                self._tidy(slot)

    def close(self) -> None:
        """The client is gone: its held pulls end (disconnect), stashes go, live pulls are retired."""
        self.shared.holds.connection_closed(self.session.client)
        for slot in self.slots.values():
            self._drop_stash(slot)
            if slot.live is not None:
                slot.live.retired = True
        self.slots.clear()

