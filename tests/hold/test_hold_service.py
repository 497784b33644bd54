"""HoldService on task.Clock: arrival, deadline, filter miss, many waiters, disconnect, shutdown,
cap — each completion case ends a held pull exactly once and leaves no entry behind."""

from __future__ import annotations

from twisted.internet import task

from rmqproxy.core.hold import WAKE_ARRIVAL, WAKE_DISCONNECT, WAKE_SHUTDOWN, WAKE_TIMEOUT, HeldPull, HoldService
from rmqproxy.broker.store import Arrival


def arrive(service: HoldService, topic: str, queue_id: int, offset: int, tags_code: int) -> None:
    service.arrived(Arrival(topic, queue_id, offset, tags_code, 0, {}))


class Waiter:
    """A held pull's owner: ``ready`` says whether a re-read would find something."""

    def __init__(self, service: HoldService, clock: task.Clock, *, key=("T", 0), offset=5, timeout=15.0,
                 conn="c1", matches=lambda arrival: True) -> None:  # fmt: skip
        self.ready = False
        self.answers: list[tuple[str, bool]] = []
        self.pull = HeldPull(key=key, offset=offset, matches=matches, conn=conn, reread=self.reread,
                             started=clock.seconds(), deadline=clock.seconds() + timeout)
        self.held = service.hold(self.pull)

    def reread(self, wake: str, final: bool) -> bool:
        if self.ready or final:
            self.answers.append((wake, self.ready))
            return True
        return False


def setup(max_held: int = 100) -> tuple[HoldService, task.Clock]:
    clock = task.Clock()
    return HoldService(clock, max_held), clock


def test_arrival_wakes_a_pull_at_once() -> None:
    service, clock = setup()
    waiter = Waiter(service, clock)
    waiter.ready = True
    arrive(service, "T", 0, 5, 0)
    assert waiter.answers == [(WAKE_ARRIVAL, True)] and service.count == 0 and not service.held()


def test_an_arrival_before_the_pulled_offset_does_not_wake() -> None:
    service, clock = setup()
    waiter = Waiter(service, clock, offset=5)
    waiter.ready = True
    arrive(service, "T", 0, 4, 0)
    arrive(service, "T", 1, 9, 0)  # another queue
    assert waiter.answers == [] and service.count == 1


def test_filter_miss_keeps_holding_with_the_same_deadline() -> None:
    service, clock = setup()
    waiter = Waiter(service, clock, matches=lambda arrival: arrival.tags_code == 7)
    waiter.ready = True
    arrive(service, "T", 0, 5, 8)
    assert waiter.answers == []
    waiter.ready = False
    arrive(service, "T", 0, 6, 7)  # matches, but the re-read finds nothing (e.g. client-side filter)
    assert waiter.answers == [] and service.count == 1
    clock.advance(15)
    assert waiter.answers == [(WAKE_TIMEOUT, False)]


def test_deadline_fires_exactly_and_not_before() -> None:
    service, clock = setup()
    waiter = Waiter(service, clock, timeout=15.0)
    clock.advance(14.999)
    assert waiter.answers == [] and service.count == 1
    clock.advance(0.001)
    assert waiter.answers == [(WAKE_TIMEOUT, False)] and service.count == 0


def test_every_waiter_on_a_queue_wakes() -> None:
    service, clock = setup()
    waiters = [Waiter(service, clock, conn=f"c{i}") for i in range(5)]
    for w in waiters:
        w.ready = True
    arrive(service, "T", 0, 5, 0)
    assert all(w.answers == [(WAKE_ARRIVAL, True)] for w in waiters) and service.count == 0


def test_arrival_and_timeout_never_both_complete_a_pull() -> None:
    service, clock = setup()
    waiter = Waiter(service, clock, timeout=1.0)
    waiter.ready = True
    arrive(service, "T", 0, 5, 0)
    clock.advance(5)
    assert waiter.answers == [(WAKE_ARRIVAL, True)]
    assert not clock.getDelayedCalls()  # the timer was cancelled


def test_disconnect_drops_only_that_connections_pulls() -> None:
    service, clock = setup()
    mine = [Waiter(service, clock, conn="gone", key=("T", q)) for q in range(3)]
    other = Waiter(service, clock, conn="stays")
    assert service.connection_closed("gone") == 3
    assert all(w.answers == [(WAKE_DISCONNECT, False)] for w in mine)
    assert service.count == 1 and other.answers == []
    assert len(clock.getDelayedCalls()) == 1


def test_shutdown_answers_everything() -> None:
    service, clock = setup()
    waiters = [Waiter(service, clock, key=("T", q)) for q in range(4)]
    service.shutdown()
    assert all(w.answers == [(WAKE_SHUTDOWN, False)] for w in waiters)
    assert service.count == 0 and not clock.getDelayedCalls()


def test_after_shutdown_a_pull_is_not_held() -> None:
    """Nothing would answer it: the caller answers it at once instead."""
    service, clock = setup()
    service.shutdown()
    late = Waiter(service, clock)
    assert late.held is False and service.count == 0 and not clock.getDelayedCalls()


def test_beyond_the_cap_a_pull_is_not_held() -> None:
    service, clock = setup(max_held=2)
    assert Waiter(service, clock).held and Waiter(service, clock).held
    assert not Waiter(service, clock).held and service.count == 2


def test_wakeups_are_counted_by_reason() -> None:
    service, clock = setup()
    Waiter(service, clock)
    w = Waiter(service, clock, key=("U", 0))
    w.ready = True
    arrive(service, "U", 0, 9, 0)
    clock.advance(15)
    assert service.wakeups == {WAKE_ARRIVAL: 1, WAKE_TIMEOUT: 1}


def test_a_reread_that_raises_is_counted_and_ends_only_that_pull() -> None:
    service, clock = setup()
    broken = Waiter(service, clock, conn="c1")
    fine = Waiter(service, clock, conn="c2")
    fine.ready = True

    def boom(wake: str, final: bool) -> bool:
        raise RuntimeError("listener bug")

    broken.pull.reread = boom
    arrive(service, "T", 0, 5, 0)
    assert fine.answers == [(WAKE_ARRIVAL, True)]
    assert service.failures == 1 and service.count == 0 and not clock.getDelayedCalls()


def test_a_reread_that_reenters_the_service_answers_its_pull_once() -> None:
    """An answer whose write closes the connection calls ``connection_closed`` from inside the
    re-read: the pull is already out of the tables, so it is not completed a second time."""
    service, clock = setup()
    waiter = Waiter(service, clock, conn="c1")
    waiter.ready = True
    inner = waiter.pull.reread

    def closing(wake: str, final: bool) -> bool:
        answered = inner(wake, final)
        service.connection_closed("c1")
        return answered

    waiter.pull.reread = closing
    arrive(service, "T", 0, 5, 0)
    assert waiter.answers == [(WAKE_ARRIVAL, True)] and service.count == 0


def test_shutdown_and_expiry_go_on_past_a_failing_pull() -> None:
    service, clock = setup()
    waiters = [Waiter(service, clock, key=("T", q)) for q in range(3)]

    def boom(wake: str, final: bool) -> bool:
        raise RuntimeError("listener bug")

    waiters[1].pull.reread = boom
    service.shutdown()
    assert waiters[0].answers == waiters[2].answers == [(WAKE_SHUTDOWN, False)]
    assert service.failures == 1 and service.count == 0


def test_pulls_with_different_deadlines_end_in_deadline_order_each_at_its_own() -> None:
    service, clock = setup()
    late = Waiter(service, clock, timeout=3.0, conn="a")
    early = Waiter(service, clock, timeout=1.0, conn="b")
    middle = Waiter(service, clock, timeout=2.0, conn="c")
    ended = []
    for waiter in (late, early, middle):
        waiter.pull.reread = lambda wake, final, w=waiter: ended.append((w, clock.seconds())) or True
    start = clock.seconds()
    for _ in range(16):
        clock.advance(0.25)  # exact in binary: the deadlines fall on steps
    assert [(w, round(t - start, 6)) for w, t in ended] == [(early, 1.0), (middle, 2.0), (late, 3.0)]


def test_one_alarm_follows_the_earliest_live_deadline() -> None:
    service, clock = setup()
    first = Waiter(service, clock, timeout=1.0, key=("T", 1))
    Waiter(service, clock, timeout=5.0, key=("T", 2))
    assert [c.getTime() - clock.seconds() for c in clock.getDelayedCalls()] == [1.0]
    first.ready = True
    arrive(service, "T", 1, 5, 0)  # the earliest ends early; its entry is stale, the alarm unmoved
    clock.advance(1.0)  # the alarm finds only that stale entry and moves to the next deadline
    assert service.count == 1 and [c.getTime() - clock.seconds() for c in clock.getDelayedCalls()] == [4.0]


def test_entries_of_pulls_woken_by_arrivals_do_not_pile_up() -> None:
    service, clock = setup(max_held=10)
    Waiter(service, clock, timeout=15.0, key=("Idle", 0))  # keeps the heap from being emptied
    for i in range(10_000):
        waiter = Waiter(service, clock, timeout=15.0, offset=i)
        waiter.ready = True
        arrive(service, "T", 0, i, 0)
        assert waiter.answers == [(WAKE_ARRIVAL, True)]
    assert service.count == 1 and len(service._deadlines) <= 2 * 64 + 2
