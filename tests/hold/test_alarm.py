"""The timerfd alarm on the real kernel timer: it fires at its time, not before, and not when
disarmed, on the monotonic clock (the reactor's: ``core.clocks``) or on the wall clock;
``precise_alarm`` and ``wall_alarm`` pick it only for a reactor that can watch a file descriptor."""

from __future__ import annotations

import select
import sys
import time

import pytest
from twisted.internet import task
from twisted.internet.interfaces import IReactorFDSet
from zope.interface import implementer

from rmqproxy.core.alarm import ClockAlarm, Deadlines, TimerfdAlarm, WallAlarm, precise_alarm, wall_alarm

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="timerfd is Linux's")


@implementer(IReactorFDSet)
class Readers:
    """Just the reader registration of a reactor: the test waits on the fd itself."""

    def __init__(self) -> None:
        self.readers: set = set()

    def addReader(self, reader) -> None:
        self.readers.add(reader)

    def removeReader(self, reader) -> None:
        self.readers.discard(reader)


def readable(alarm: TimerfdAlarm, within: float) -> bool:
    return bool(select.select([alarm.fileno()], [], [], within)[0])


@linux_only
@pytest.mark.parametrize("wall, now", [(False, time.monotonic), (True, time.time)], ids=["monotonic", "wall"])
def test_timerfd_fires_at_its_time_and_the_clock_has_reached_it(wall: bool, now) -> None:
    reactor, fired = Readers(), []
    alarm = TimerfdAlarm(reactor, lambda: fired.append(now()), wall=wall)
    try:
        assert alarm in reactor.readers
        when = now() + 0.05
        alarm.set(when)
        assert not readable(alarm, 0.0)
        assert readable(alarm, 5.0)
        alarm.doRead()
        assert len(fired) == 1 and fired[0] >= when
        alarm.doRead()  # a second read finds no expiry and does not fire
        assert len(fired) == 1
    finally:
        alarm.close()
    assert alarm not in reactor.readers


@linux_only
def test_a_disarmed_or_moved_timerfd_does_not_fire_at_the_old_time() -> None:
    alarm = TimerfdAlarm(Readers(), lambda: None)  # on the monotonic clock
    try:
        alarm.set(time.monotonic() + 0.02)
        alarm.set(None)
        assert not readable(alarm, 0.1)
        alarm.set(time.monotonic() + 0.02)
        alarm.set(time.monotonic() + 60)
        assert not readable(alarm, 0.1)
        alarm.set(time.monotonic() - 1)  # a time already past fires at once
        assert readable(alarm, 1.0)
    finally:
        alarm.close()


@linux_only
def test_precise_alarm_is_a_timerfd_only_on_a_reactor_that_watches_fds() -> None:
    real = precise_alarm(Readers(), lambda: None)
    try:
        assert isinstance(real, TimerfdAlarm)
    finally:
        real.close()
    assert isinstance(precise_alarm(task.Clock(), lambda: None), ClockAlarm)


@linux_only
def test_wall_alarm_is_a_realtime_timerfd_only_on_the_machine_s_wall_clock_and_a_reactor_that_watches_fds() -> None:
    real = wall_alarm(Readers(), time.time, lambda: None)
    try:
        assert isinstance(real, TimerfdAlarm) and real.wall
    finally:
        real.close()
    clock = task.Clock()
    assert isinstance(wall_alarm(clock, time.time, lambda: None), WallAlarm)
    assert isinstance(wall_alarm(Readers(), lambda: 0.0, lambda: None), WallAlarm)  # an injected wall clock


def test_a_wall_alarm_follows_the_wall_clock_either_way() -> None:
    """It fires once the wall clock reaches its time: a step forward brings it nearer (it reads
    the wall clock at least every second), a step back puts it off; the reactor's clock is untouched."""
    clock, step, fired = task.Clock(), [0.0], []
    alarm = WallAlarm(clock, lambda: clock.seconds() + step[0], lambda: fired.append(clock.seconds()))
    alarm.set(10.0)
    step[0] = 5.0  # forward: due at reactor time 5
    clock.advance(4.5)
    assert fired == []
    clock.advance(0.5)
    assert fired == [5.0]
    alarm.set(13.0)  # 3 s from now on the wall clock (reactor time 8)
    step[0] = -5.0  # back: now due at reactor time 18
    clock.advance(12.5)
    assert fired == [5.0]
    clock.advance(0.5)
    assert fired == [5.0, 18.0]
    alarm.set(clock.seconds() + 100)
    alarm.close()
    clock.advance(200)
    assert len(fired) == 2 and not clock.getDelayedCalls()


def test_clock_alarm_keeps_one_call_and_moves_it() -> None:
    clock, fired = task.Clock(), []
    alarm = ClockAlarm(clock, lambda: fired.append(clock.seconds()))
    alarm.set(5.0)
    alarm.set(2.0)
    assert [c.getTime() for c in clock.getDelayedCalls()] == [2.0]
    clock.advance(2.0)
    assert fired == [2.0] and not clock.getDelayedCalls()
    alarm.set(3.0)
    alarm.close()
    assert not clock.getDelayedCalls()


class ManualAlarm:
    """An inner alarm that never wakes by itself: what a timerfd is while the reactor is busy."""

    def __init__(self, fire) -> None:
        self.fire = fire
        self.sets: list[float | None] = []
        self.closed = False

    def set(self, when: float | None) -> None:
        self.sets.append(when)

    def close(self) -> None:
        self.closed = True


def _board(now: list[float]) -> tuple[Deadlines, list[ManualAlarm]]:
    inner: list[ManualAlarm] = []

    def make(fire) -> ManualAlarm:
        inner.append(ManualAlarm(fire))
        return inner[-1]

    return Deadlines(lambda: now[0], make), inner


def test_deadlines_fire_a_due_alarm_on_poll_and_disarm_its_own_wake_up() -> None:
    now, fired = [0.0], []
    board, inner = _board(now)
    a = board.alarm(lambda: fired.append(("a", now[0])))
    b = board.alarm(lambda: fired.append(("b", now[0])))
    a.set(2.0)
    b.set(1.0)
    assert board.earliest == 1.0
    now[0] = 0.5
    board.poll()
    assert fired == []
    now[0] = 1.5
    board.poll()
    assert fired == [("b", 1.5)] and inner[1].sets == [1.0, None] and board.earliest == 2.0
    inner[0].fire()  # a's own wake-up (the timerfd read) still works, and is counted once
    assert fired == [("b", 1.5), ("a", 1.5)] and board.earliest == float("inf")
    assert board.early_fires == 1
    a.set(3.0)
    a.close()
    assert inner[0].closed and board.earliest == float("inf")
    now[0] = 9.0
    board.poll()
    assert len(fired) == 2


def test_a_deadline_due_in_the_middle_of_a_read_is_answered_before_the_read_s_next_request() -> None:
    """Each request of the read costs 1 s of the clock; the held pull's deadline at 1.5 s is kept
    between the second request and the third, not after the whole read."""
    from codec.command import RemotingCommand
    from rmqproxy.net.transport import Connection
    from twisted.internet.testing import StringTransport

    now, order = [0.0], []
    board, _inner = _board(now)

    def handler(request: RemotingCommand, conn: Connection) -> RemotingCommand:
        now[0] += 1.0
        order.append(f"request {request.opaque}")
        return request.response(0)

    alarm = board.alarm(lambda: order.append("deadline"))
    alarm.set(1.5)
    conn = Connection(handler, task.Clock(), max_frame_bytes=1 << 20, deadlines=board)
    conn.makeConnection(StringTransport())
    conn.dataReceived(b"".join(RemotingCommand(code=34, opaque=o).encode() for o in (1, 2, 3)))
    assert order == ["request 1", "request 2", "deadline", "request 3"]
