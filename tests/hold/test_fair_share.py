"""HoldService at ``max_held`` (case E): a pull from a connection below its fair share is held and
the connection holding the most gives way, its newest held pull ended with wake ``evicted``; a
connection alone, or at or above its share, is answered at once as before; the per-connection
cap still applies; and the "holding the most" bookkeeping stays exact through every way a pull
ends (checked against a brute-force count)."""

from __future__ import annotations

import random

from twisted.internet import task

from rmqproxy.core.hold import WAKE_DISCONNECT, WAKE_EVICTED, WAKE_TIMEOUT, HoldService

from .test_hold_service import Waiter, arrive


def setup(max_held: int, per_conn: int = 10_000) -> tuple[HoldService, task.Clock]:
    clock = task.Clock()
    return HoldService(clock, max_held, per_conn), clock


def hold_many(service: HoldService, clock: task.Clock, conn: str, n: int, **kw) -> list[Waiter]:
    waiters = [Waiter(service, clock, conn=conn, key=("T", q), **kw) for q in range(n)]
    assert all(w.held for w in waiters)
    return waiters


def check_tally(service: HoldService) -> None:
    """The buckets and the highest count say what a scan over the connections would."""
    counts = {conn: len(pulls) for conn, pulls in service._by_conn.items()}
    assert all(counts.values())
    assert service._most == max(counts.values(), default=0)
    by_count: dict[int, set] = {}
    for conn, n in counts.items():
        by_count.setdefault(n, set()).add(conn)
    assert {n: set(conns) for n, conns in service._conns_holding.items()} == by_count
    assert service.count == sum(counts.values())


def test_at_the_cap_a_pull_below_its_fair_share_is_held_and_the_hogs_newest_gives_way() -> None:
    service, clock = setup(max_held=4)
    hog = hold_many(service, clock, "hog", 4)
    normal = Waiter(service, clock, conn="normal", timeout=2.0)
    assert normal.held and service.count == 4
    assert hog[-1].answers == [(WAKE_EVICTED, False)]  # final re-read: its caller answers busy
    assert all(w.answers == [] for w in hog[:-1]) and hog[-1].pull.done
    assert service.wakeups == {WAKE_EVICTED: 1}
    remark = service.eviction_remark
    assert "maxHeldPulls 4" in remark and "this connection holds 4" in remark
    assert "fair share of 2" in remark and "2 connections holding pulls" in remark
    # the normal consumer's long poll is held its whole suspend time, not answered at once
    clock.advance(1.999)
    assert normal.answers == []
    clock.advance(0.001)
    assert normal.answers == [(WAKE_TIMEOUT, False)]
    check_tally(service)


def test_a_hog_alone_at_the_cap_gets_its_next_pull_answered_at_once() -> None:
    """Alone its fair share is the whole cap: nothing gives way, the pull is not held (as before)."""
    service, clock = setup(max_held=4)
    hog = hold_many(service, clock, "hog", 4)
    late = Waiter(service, clock, conn="hog")
    assert late.held is False and service.count == 4
    assert all(w.answers == [] for w in hog) and service.wakeups == {}


def test_a_connection_at_its_fair_share_is_not_held_at_the_cap() -> None:
    service, clock = setup(max_held=4)
    hold_many(service, clock, "a", 2)
    hold_many(service, clock, "b", 2)
    assert Waiter(service, clock, conn="a").held is False  # 2 of 4 over 2 connections: its share
    assert service.wakeups == {} and service.count == 4


def test_the_connection_holding_the_most_gives_way_not_the_next() -> None:
    service, clock = setup(max_held=8)
    big = hold_many(service, clock, "big", 5)
    mid = hold_many(service, clock, "mid", 3)
    assert Waiter(service, clock, conn="new").held
    assert big[-1].answers == [(WAKE_EVICTED, False)] and all(w.answers == [] for w in big[:-1] + mid)
    check_tally(service)


def test_eviction_evens_out_and_stops_where_no_connection_holds_two_more() -> None:
    """Two connections never pass a slot back and forth: one gives way only while it holds at least
    two more than the puller would."""
    service, clock = setup(max_held=2)
    a = hold_many(service, clock, "a", 2)
    b = Waiter(service, clock, conn="b")
    assert b.held and a[-1].answers == [(WAKE_EVICTED, False)]
    for conn in ("a", "b", "a"):  # 1 each: at the share, so answered at once, nothing evicted
        assert Waiter(service, clock, conn=conn).held is False
    assert service.wakeups == {WAKE_EVICTED: 1}

    service, clock = setup(max_held=1)
    hold_many(service, clock, "a", 1)
    assert Waiter(service, clock, conn="b").held is False  # 1 is not two more than 0 + 1
    assert service.wakeups == {}


def test_an_uneven_cap_lets_the_puller_reach_its_share() -> None:
    service, clock = setup(max_held=5)
    hold_many(service, clock, "a", 4)
    hold_many(service, clock, "b", 1)
    assert Waiter(service, clock, conn="b").held  # 1 of a 2.5 share; a holds 4
    assert Waiter(service, clock, conn="b").held is False  # 2 < 2.5, but a holds 3: not two more
    assert len(service._by_conn["a"]) == 3 and len(service._by_conn["b"]) == 2
    check_tally(service)


def test_the_per_connection_cap_still_applies_below_and_at_the_cap() -> None:
    service, clock = setup(max_held=100, per_conn=3)
    hold_many(service, clock, "c", 3)
    assert Waiter(service, clock, conn="c").held is False and service.count == 3

    service, clock = setup(max_held=4, per_conn=2)
    hold_many(service, clock, "a", 2)
    hold_many(service, clock, "b", 2)
    c = Waiter(service, clock, conn="c")
    assert c.held and service.wakeups == {WAKE_EVICTED: 1}
    service.max_held_per_conn = 1  # a runtime change: c is full now, even below its share
    assert Waiter(service, clock, conn="c").held is False and service.wakeups == {WAKE_EVICTED: 1}


def test_the_newest_held_pull_gives_way_and_its_deadline_entry_is_left_stale() -> None:
    service, clock = setup(max_held=3)
    first = Waiter(service, clock, conn="hog", key=("T", 0), timeout=5.0)
    second = Waiter(service, clock, conn="hog", key=("T", 1), timeout=1.0)
    newest = Waiter(service, clock, conn="hog", key=("T", 2), timeout=9.0)
    normal = Waiter(service, clock, conn="normal", key=("U", 0), timeout=3.0)
    assert normal.held and newest.answers == [(WAKE_EVICTED, False)]
    assert not service.held(("T", 2)) and {p.key for p in service.held()} == {("T", 0), ("T", 1), ("U", 0)}
    clock.advance(1.0)
    assert second.answers == [(WAKE_TIMEOUT, False)]
    clock.advance(2.0)
    assert normal.answers == [(WAKE_TIMEOUT, False)]
    clock.advance(2.0)
    assert first.answers == [(WAKE_TIMEOUT, False)]
    clock.advance(10.0)
    assert newest.answers == [(WAKE_EVICTED, False)]  # ended once: its own deadline did nothing
    assert service.count == 0 and not clock.getDelayedCalls()
    assert service.wakeups == {WAKE_EVICTED: 1, WAKE_TIMEOUT: 3}


def test_an_evicted_pull_whose_answer_closes_its_connection_leaves_the_new_pull_held() -> None:
    service, clock = setup(max_held=3)
    hog = hold_many(service, clock, "hog", 3)
    inner = hog[-1].pull.reread

    def closing(wake: str, final: bool) -> bool:
        answered = inner(wake, final)
        service.connection_closed("hog")  # the busy answer's write failed: the hog is gone
        return answered

    hog[-1].pull.reread = closing
    normal = Waiter(service, clock, conn="normal")
    assert normal.held and service.count == 1 and [p.conn for p in service.held()] == ["normal"]
    assert hog[-1].answers == [(WAKE_EVICTED, False)]
    assert all(w.answers == [(WAKE_DISCONNECT, False)] for w in hog[:-1])
    check_tally(service)


def test_an_evicted_pull_whose_reread_raises_is_counted_and_the_new_pull_held() -> None:
    service, clock = setup(max_held=2)
    hog = hold_many(service, clock, "hog", 2)

    def boom(wake: str, final: bool) -> bool:
        raise RuntimeError("listener bug")

    hog[-1].pull.reread = boom
    assert Waiter(service, clock, conn="normal").held
    assert service.failures == 1 and service.count == 2 and service.wakeups == {WAKE_EVICTED: 1}


def test_after_shutdown_nothing_is_held_or_evicted() -> None:
    service, clock = setup(max_held=2)
    hog = hold_many(service, clock, "hog", 2)
    service.shutdown()
    assert Waiter(service, clock, conn="normal").held is False
    assert all(len(w.answers) == 1 for w in hog) and WAKE_EVICTED not in service.wakeups


def test_the_tally_of_connections_by_pulls_held_stays_exact() -> None:
    """Holds, evictions, arrivals (answered or put back), timeouts, disconnects, in a random order."""
    rng = random.Random(40)
    service, clock = setup(max_held=12, per_conn=6)
    conns = [f"c{i}" for i in range(5)]
    waiters: list[Waiter] = []
    for _ in range(3000):
        op = rng.random()
        if op < 0.55:
            waiters.append(Waiter(service, clock, conn=rng.choice(conns), key=("T", rng.randrange(3)),
                                  timeout=rng.choice((0.5, 1.0, 2.0))))  # fmt: skip
        elif op < 0.75:
            for w in waiters:
                w.ready = rng.random() < 0.5
            arrive(service, "T", rng.randrange(3), 10, 0)
        elif op < 0.9:
            clock.advance(0.25)
        else:
            service.connection_closed(rng.choice(conns))
        check_tally(service)
        assert service.count <= service.max_held
        assert all(len(w.answers) <= 1 for w in waiters)  # every pull ended at most once
    assert service.wakeups.get(WAKE_EVICTED, 0) > 0
