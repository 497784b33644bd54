"""``GET /metrics``: the registry's text exposition, rendered on the reactor in slices.

A scrape of a server with thousands of label sets takes a hundred milliseconds and more of
Python. Rendered in one call it held the reactor that long, and every held pull whose deadline
fell inside it was answered that late. Here the exposition is made one slice at a time (one
metric family, or at most ``CHILDREN_PER_SLICE`` label sets of a reactor family), and a scrape
renders slices for at most ``SLICE_BUDGET_S`` per reactor turn before the reactor serves its
timers and sockets again. The bytes are the ones ``generate_latest`` writes; collectors still
read the tables on the reactor thread, without locks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from twisted.internet import defer
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET

__all__ = ["CHILDREN_PER_SLICE", "SLICE_BUDGET_S", "MetricsResource", "exposition_slices", "render_in_turns"]

#: Label sets of one reactor family rendered per slice (about 1 ms for a histogram).
CHILDREN_PER_SLICE = 64
#: Rendering done per reactor turn, in seconds, before the reactor runs again.
SLICE_BUDGET_S = 0.002


class _One:
    """One metric family as a collector, for ``generate_latest``."""

    def __init__(self, family: Any) -> None:
        self.family = family

    def collect(self) -> Iterable[Any]:
        return (self.family,)


def exposition_slices(registry: CollectorRegistry, children_per_slice: int = CHILDREN_PER_SLICE) -> Iterator[bytes]:
    """The text exposition of ``registry`` as consecutive slices, each a bounded piece of work.

    A collector with an ``exposition(children_per_slice)`` method (the reactor families) renders
    itself; any other is collected lazily, one family per slice. Collectors are taken as the
    registry holds them when the scrape starts, as ``CollectorRegistry.collect`` takes them.
    """
    for collector in list(registry._collector_to_names):  # noqa: SLF001 (what collect() iterates)
        render = getattr(collector, "exposition", None)
        if render is not None:
            for text in render(children_per_slice):
                yield text.encode()
        else:
            for family in collector.collect():
                yield generate_latest(_One(family))


def render_in_turns(
    registry: CollectorRegistry, reactor: Any, write: Callable[[bytes], None], *, budget_s: float = SLICE_BUDGET_S,
    clock: Callable[[], float] = time.perf_counter, gone: Callable[[], bool] = lambda: False,
) -> defer.Deferred:
    """Pass ``registry``'s exposition to ``write`` slice by slice, ``budget_s`` of rendering per
    reactor turn; the Deferred fires once all is written, or never if ``gone()`` says to stop."""
    slices = exposition_slices(registry)
    done: defer.Deferred = defer.Deferred()

    def turn() -> None:
        if gone():
            return
        end = clock() + budget_s
        for chunk in slices:
            write(chunk)
            if clock() >= end:
                reactor.callLater(0, turn)
                return
        done.callback(None)

    turn()
    return done


class MetricsResource(Resource):
    """``GET /metrics``, written as it is rendered, ``budget_s`` of rendering per reactor turn."""

    isLeaf = True

    def __init__(
        self, registry: CollectorRegistry, reactor: Any, *, budget_s: float = SLICE_BUDGET_S,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:  # fmt: skip
        super().__init__()
        self.registry = registry
        self.reactor = reactor
        self.budget_s = budget_s
        self.clock = clock

    def render_GET(self, request: Any) -> Any:
        request.setHeader(b"Content-Type", CONTENT_TYPE_LATEST.encode())
        gone: list[Any] = []  # the scraper went away
        request.notifyFinish().addBoth(gone.append)
        render_in_turns(self.registry, self.reactor, request.write, budget_s=self.budget_s, clock=self.clock,
                        gone=lambda: bool(gone)).addCallback(lambda _: request.finish())  # fmt: skip
        return NOT_DONE_YET
