"""What one proxy's sessions share, handed to each session by the root: never the root itself.

A ``BrokerSession`` and its ``PullRelay`` need the clock, the dialer, the hold service, the bound
on kept late answers, the lock handoff, and two ways to report (a relayed request's round trip, a
pull's event). The root builds one ``Relaying`` of them at start, so the dependencies point one
way: root -> session -> pull relay, root -> handoff.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ..core.hold import HoldService
from ..observe.pull_events import PullEvent
from .handoff import LockHandoff
from .nodes import Node
from .upstream import Dialer

__all__ = ["MAX_STASH_BYTES", "Relaying", "StashBudget"]

#: Bytes of late upstream answers kept, over every session of a proxy.
MAX_STASH_BYTES = 256 << 20


class StashBudget:
    """Bytes of late upstream answers kept for their clients' next pulls, over every session."""

    def __init__(self, limit: int = MAX_STASH_BYTES) -> None:
        self.limit = limit
        self.used = 0

    def take(self, size: int) -> bool:
        """Room for ``size`` more bytes: taken, or False when the bound would be passed."""
        if self.used + size > self.limit:
            return False
        self.used += size
        return True

    def give(self, size: int) -> None:
        self.used -= size


@dataclasses.dataclass(frozen=True)
class Relaying:
    """The parts of one proxy every session uses (see the module docstring)."""

    clock: Any  # the reactor: IReactorTime, monotonic (``core.clocks``)
    wall: Callable[[], float]  # the wall clock: the event log's timestamps
    dialer: Dialer
    timeout_s: float  # proxyRequestTimeoutMillis: an upstream answer later than this is SYSTEM_ERROR
    holds: HoldService
    max_suspend_s: float  # maxPullSuspendTimeMillis: the longest a client's pull is held
    stash: StashBudget
    handoff: LockHandoff
    answered: Callable[[Node, int, int, float], None]  # (node, request code, response code, elapsed ms)
    pulled: Callable[[Node, PullEvent], None]  # a client pull was answered
    rejected: Callable[..., None]  # counts a refusal by reason (``rejects.Rejections``)
