"""The store's runtime figures: put times as the reference's ``StoreStatsService`` reports them
(distribution, percentiles, longest), refused puts, bytes stored, bytes not yet flushed and the
delay levels' progress."""

from __future__ import annotations

import dataclasses

from rmqproxy.broker.store import FLUSH_SYNC, PutStatus
from rmqproxy.broker.store.puttimes import EXACT_MS, PutTimes

from .conftest import SMALL, msg


def times_of(*ms: int) -> PutTimes:
    """A ``PutTimes`` whose last minute had puts of ``ms`` each."""
    now = [0.0]
    times = PutTimes(lambda: now[0])
    for took in ms:
        now[0] = (took + 0.5) / 1000  # mid-millisecond: whole ms are ``took`` whatever the rounding
        times.took(0.0)
    times.rotate()
    return times


def test_distribution_uses_the_reference_ranges_and_text() -> None:
    times = times_of(0, -3, 1, 9, 10, 49, 50, 999, 1000, 9999, 10_000, 60_000)
    assert times.distribution() == (
        "[<=0ms]:2 [0~10ms]:2 [10~50ms]:2 [50~100ms]:1 [100~200ms]:0 [200~500ms]:0 [500ms~1s]:1 [1~2s]:1 "
        "[2~3s]:0 [3~4s]:0 [4~5s]:0 [5~10s]:1 [10s~]:2 "
    )


def test_percentiles_interpolate_in_the_reference_buckets() -> None:
    assert times_of(*[0] * 100).percentile(0.99) == 0.99  # index 99 of 100 in bucket (..1]
    times = times_of(*[0] * 980, *[30] * 19, 700)
    assert times.percentile(0.99) == 28 + 2 * 10 / 19  # index 990: the 10th of 19 in (28, 30]
    assert times.percentile(0.999) == 30.0  # index 999: the last of them
    assert times_of().percentile(0.99) == 0.0
    assert PutTimes(lambda: 0.0).percentile(0.99) == 0.0  # no whole minute yet


def test_longest_is_kept_across_minutes_and_past_the_exact_slots() -> None:
    times = times_of(3, 17)
    assert times.longest() == 17
    times.rotate()
    assert times.longest() == 17 and times.distribution().startswith("[<=0ms]:0 [0~10ms]:0 [10~50ms]:0")
    assert times_of(EXACT_MS + 5).longest() == EXACT_MS + 5


def test_async_puts_take_the_time_of_the_put_and_sync_ones_until_their_fsync(open_store, clock) -> None:
    store = open_store()
    store.put(msg())
    store.put_batch([msg(), msg()])  # a batch is one put
    assert store.put_times.counts[0] == 2
    sync = open_store(dataclasses.replace(SMALL, flush_disk_type=FLUSH_SYNC, flush_interval_commit_log_ms=10_000),
                      root=store.root.parent / "sync")  # fmt: skip
    ticket = sync.put(msg())
    clock.now += 0.0425  # 42 whole ms
    while not ticket.done:
        sync.completions.run_pending(timeout=5)
    assert sync.put_times.counts[42] == 1 and sync.put_times.longest() == 42


def test_refused_puts_are_counted(open_store) -> None:
    store = open_store(dataclasses.replace(SMALL, max_message_size=16))
    assert store.put(msg(body=b"x" * 17)).result.status == PutStatus.MESSAGE_ILLEGAL
    assert store.put(msg()).result.ok
    store.shutdown()
    assert store.put(msg()).result.status == PutStatus.SERVICE_NOT_AVAILABLE
    assert (store.put_failed, store.put_count) == (2, 1)


def test_put_bytes_are_the_records_stored_since_start_without_segment_blanks(open_store) -> None:
    store = open_store()
    first = [store.put(msg(body=b"a" * 900)).result.messages[0] for _ in range(80)]  # > one 64 KiB segment
    assert store.commitlog.blank_bytes > 0
    assert store.put_bytes == sum(m.store_size for m in first)
    store.shutdown()
    again = open_store()
    assert again.put_bytes == 0
    assert again.put(msg()).result.messages[0].store_size == again.put_bytes


def test_unflushed_bytes_and_delay_progress(open_store, clock) -> None:
    store = open_store(dataclasses.replace(SMALL, flush_interval_commit_log_ms=60_000))
    store.put(msg())
    assert store.unflushed_bytes == store.max_physical_offset - store.min_physical_offset
    assert store.delay_progress() == {}
    store.put(msg(DELAY="2"))
    store.put(msg(DELAY="2"))
    clock.now += 5  # level 2 is 5 s
    store.deliver_due()
    assert store.delay_progress() == {2: (2, 2)}
