"""The timerfd alarm on the real kernel timer: it fires at its time, not before, and not when
disarmed; ``precise_alarm`` picks it only for a reactor that can watch a file descriptor."""

from __future__ import annotations

import select
import sys
import time

import pytest
from twisted.internet import task
from twisted.internet.interfaces import IReactorFDSet
from zope.interface import implementer

from rmqproxy.alarm import ClockAlarm, TimerfdAlarm, precise_alarm

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
def test_timerfd_fires_at_its_time_and_the_clock_has_reached_it() -> None:
    reactor, fired = Readers(), []
    alarm = TimerfdAlarm(reactor, lambda: fired.append(time.time()))
    try:
        assert alarm in reactor.readers
        when = time.time() + 0.05
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
    alarm = TimerfdAlarm(Readers(), lambda: None)
    try:
        alarm.set(time.time() + 0.02)
        alarm.set(None)
        assert not readable(alarm, 0.1)
        alarm.set(time.time() + 0.02)
        alarm.set(time.time() + 60)
        assert not readable(alarm, 0.1)
        alarm.set(time.time() - 1)  # a time already past fires at once
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
