"""How long the store's puts take: the reference's ``StoreStatsService`` put-time figures.

A put's time is whole milliseconds on the store's clock from the store taking it to its ticket
completing: the append under ASYNC_FLUSH, the append and the wait for the fsync that covers it
under SYNC_FLUSH (the reference times ``asyncPutMessage`` to its future completing the same way;
a batch is one put). Each put adds one to ``counts[ms]``, a fixed array with a slot per
millisecond up to 10 s and one slot for longer, so a put pays one clock read, one compare and one
addition. The reference's two bucket layouts are both sums of those slots, made when read: the 13
ranges of ``putMessageDistributeTime`` and the ceilings ``putLatency99``/``putLatency999`` are
interpolated in (``findPutMessageEntireTimePX``). Like the reference, both describe the last
whole minute: ``rotate``, every ``PERIOD_S``, keeps the minute just ended and starts anew.
"""

from __future__ import annotations

from collections.abc import Callable

EXACT_MS = 10_000  # puts up to this many ms have a slot each
OVER = EXACT_MS + 1  # the slot of every longer put
PERIOD_S = 60.0  # the reference's printTPSInterval: the figures describe the last whole minute

#: ``putMessageDistributeTime``'s ranges as slot slices [lo, hi): the reference's ``value <= 0``,
#: ``value < 10``, ... ``value < 10000`` and the rest.
DISTRIBUTION = (("[<=0ms]", 0, 1), ("[0~10ms]", 1, 10), ("[10~50ms]", 10, 50), ("[50~100ms]", 50, 100),
                ("[100~200ms]", 100, 200), ("[200~500ms]", 200, 500), ("[500ms~1s]", 500, 1000),
                ("[1~2s]", 1000, 2000), ("[2~3s]", 2000, 3000), ("[3~4s]", 3000, 4000), ("[4~5s]", 4000, 5000),
                ("[5~10s]", 5000, 10000), ("[10s~]", 10000, OVER + 1))  # fmt: skip


def _percentile_buckets() -> tuple[tuple[int, int, int], ...]:
    """``PUT_MESSAGE_ENTIRE_TIME_BUCKETS`` as (ceiling, slot slice [lo, hi)): ceilings 1..20 by 1, to
    50 by 2, to 100 by 5, to 200 by 10, to 500 by 50, to 1000 by 100, to 10000 by 1000, then
    ``Long.MAX_VALUE``; a put of ms lands in the first ceiling >= ms."""
    buckets, ceiling, lo = [], 0, 0
    for step, times in ((1, 20), (2, 15), (5, 10), (10, 10), (50, 6), (100, 5), (1000, 9)):
        for _ in range(times):
            ceiling += step
            buckets.append((ceiling, lo, ceiling + 1))
            lo = ceiling + 1
    buckets.append((2**63 - 1, OVER, OVER + 1))
    return tuple(buckets)


PERCENTILE_BUCKETS = _percentile_buckets()


class PutTimes:
    """Put times of the current and the last whole minute, and the longest since start."""

    __slots__ = ("clock", "counts", "last", "_longest")

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock  # the store's clock, in seconds
        self.counts = [0] * (OVER + 1)  # this minute's puts by ms (OVER: longer than EXACT_MS)
        self.last: list[int] | None = None  # the last whole minute's, once one has passed
        self._longest = 0  # ms: the longest put of minutes past and of puts past EXACT_MS

    def took(self, began: float) -> None:
        """Count a put that began at ``began`` (clock seconds) and ends now. On the send path: one
        under a millisecond, nearly every one, costs a clock read, a compare and an addition."""
        ms = (self.clock() - began) * 1000
        if ms < 1:  # a clock stepped back lands here too: the reference's ``value <= 0``
            self.counts[0] += 1
        else:
            self._count(int(ms))

    def _count(self, ms: int) -> None:
        if ms <= EXACT_MS:
            self.counts[ms] += 1
        else:
            self.counts[OVER] += 1
            self._longest = max(self._longest, ms)

    def rotate(self) -> None:
        """The minute ends: its counts become the last minute's (every ``PERIOD_S``)."""
        self._longest = max(self._longest, _highest(self.counts))
        self.last, self.counts = self.counts, [0] * (OVER + 1)

    def longest(self) -> int:
        """The longest put since start, ms (``putMessageEntireTimeMax``)."""
        return max(self._longest, _highest(self.counts))

    def distribution(self) -> str:
        """The last minute's puts by range as the reference writes them (``putMessageDistributeTime``:
        ``"[<=0ms]:n [0~10ms]:n ... [10s~]:n "``), or ``"null"`` before a minute has passed, as there."""
        last = self.last
        if last is None:
            return "null"
        return "".join(f"{label}:{sum(last[lo:hi])} " for label, lo, hi in DISTRIBUTION)

    def percentile(self, px: float) -> float:
        """The last minute's put time at ``px`` (0.99: p99), ms, interpolated in its ceiling bucket as
        ``findPutMessageEntireTimePX`` does; 0.0 before a minute has passed."""
        last = self.last
        if last is None:
            return 0.0
        counts = [sum(last[lo:hi]) for _ceiling, lo, hi in PERCENTILE_BUCKETS]
        index = int(sum(counts) * px)
        passed = 0
        for i, ((ceiling, _lo, _hi), count) in enumerate(zip(PERCENTILE_BUCKETS, counts)):  # noqa: B905 (same length)
            if index <= passed + count:
                below = PERCENTILE_BUCKETS[i - 1][0] if i else 0
                return below + ((ceiling - below) * (index - passed) / count if count else 0.0)
            passed += count
        return 0.0


def _highest(counts: list[int]) -> int:
    """The highest ms slot with a put (0 if none); OVER's puts are in ``_longest`` already."""
    for ms in range(EXACT_MS, 0, -1):
        if counts[ms]:
            return ms
    return 0
