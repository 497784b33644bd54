"""One-shot alarms at an absolute time: the reactor's (monotonic) for deadlines, the wall clock's for due times.

A Twisted reactor sleeps in ``epoll``, and Python rounds that sleep up to whole milliseconds, so a
``callLater`` runs up to 1 ms after its time even on an idle server. On Linux a timerfd armed at
the absolute ``CLOCK_MONOTONIC`` time (the reactor's clock is ``time.monotonic``:
``core.clocks``) wakes the poll at the deadline itself, and a wall-clock step moves it not at all.
``ClockAlarm`` is the portable one on ``callLater``; it is also what tests use, on ``task.Clock``.
``Deadlines`` keeps a server's alarms in sight of its connections, which fire a due one between
the frames of a read rather than after it.

Timer and delay messages and pop invisibility are due at wall-clock times (persisted, as the
reference's), so their alarms follow the wall clock: ``wall_alarm`` is a ``CLOCK_REALTIME``
timerfd (a step forward fires it at once, a step back delays it), or ``WallAlarm``, which waits on
the reactor at most ``WALL_RECHECK_S`` at a time and fires once the wall clock has reached its time.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import os
import time
from collections.abc import Callable
from typing import Any, Protocol

from twisted.internet.interfaces import IDelayedCall, IReactorFDSet, IReactorTime
from twisted.logger import Logger

log = Logger()

_CLOCK_REALTIME = 0
_CLOCK_MONOTONIC = 1
_TFD_CLOEXEC = 0o2000000
_TFD_NONBLOCK = 0o4000
_TFD_TIMER_ABSTIME = 1


class Alarm(Protocol):
    """Calls its ``fire`` once at or just after the last time ``set``; ``set(None)`` disarms."""

    def set(self, when: float | None) -> None: ...

    def close(self) -> None: ...


class ClockAlarm:
    """An alarm on ``callLater``: as precise as the reactor's own timers."""

    def __init__(self, clock: IReactorTime, fire: Callable[[], None]) -> None:
        self.clock = clock
        self.fire = fire
        self._call: IDelayedCall | None = None

    def set(self, when: float | None) -> None:
        call = self._call
        if call is not None and call.active():
            if when is not None and call.getTime() == when:
                return
            call.cancel()
        self._call = None if when is None else self.clock.callLater(max(0.0, when - self.clock.seconds()), self._fired)

    def _fired(self) -> None:
        self._call = None
        self.fire()

    def close(self) -> None:
        self.set(None)


#: How long a ``WallAlarm`` waits on the reactor before it reads the wall clock again: how late a
#: wall-clock step forward may deliver what it made due (the reference's timer wheel ticks each 1 s).
WALL_RECHECK_S = 1.0


class WallAlarm:
    """An alarm at a wall-clock time on ``callLater``: it waits at most ``WALL_RECHECK_S`` at a
    time, so a wall-clock step either way moves it as it moves the time it waits for."""

    def __init__(self, clock: IReactorTime, wall: Callable[[], float], fire: Callable[[], None]) -> None:
        self.clock = clock
        self.wall = wall
        self.fire = fire
        self._when: float | None = None
        self._call: IDelayedCall | None = None

    def set(self, when: float | None) -> None:
        if when == self._when and self._call is not None and self._call.active():
            return
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._when = when
        self._call = None
        if when is not None:
            self._call = self.clock.callLater(min(max(0.0, when - self.wall()), WALL_RECHECK_S), self._woke)

    def _woke(self) -> None:
        self._call = None
        when = self._when
        if when is None:
            return
        if self.wall() < when:
            self.set(when)
            return
        self._when = None
        self.fire()

    def close(self) -> None:
        self.set(None)


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


def _libc() -> Any | None:
    """libc with ``timerfd_create`` and ``timerfd_settime``, or None off Linux."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        libc.timerfd_create.argtypes = (ctypes.c_int, ctypes.c_int)
        libc.timerfd_settime.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.POINTER(_Itimerspec), ctypes.c_void_p)
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _libc()


class TimerfdAlarm:
    """An alarm on a Linux timerfd the reactor reads: it wakes the reactor's poll at ``when``
    itself, to the microsecond, where a ``callLater`` waits for the next whole millisecond.
    ``wall`` arms it on ``CLOCK_REALTIME`` (``time.time``), else on ``CLOCK_MONOTONIC`` (the reactor's)."""

    def __init__(self, reactor: IReactorFDSet, fire: Callable[[], None], *, wall: bool = False) -> None:
        if _LIBC is None:
            raise OSError("timerfd is not available")
        self.wall = wall
        fd = _LIBC.timerfd_create(_CLOCK_REALTIME if wall else _CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC)
        if fd < 0:
            errno = ctypes.get_errno()
            raise OSError(errno, os.strerror(errno))
        self.fd = fd
        self.reactor = reactor
        self.fire = fire
        self._spec = _Itimerspec()
        self._when: float | None = None
        reactor.addReader(self)

    def set(self, when: float | None) -> None:
        if when == self._when or self.fd < 0:
            return
        self._when = when
        value = self._spec.it_value
        if when is None:
            value.tv_sec = value.tv_nsec = 0  # all zero disarms
        else:  # rounded up, so the clock has reached ``when`` once the timer fires
            seconds = math.floor(when)
            value.tv_sec = seconds
            value.tv_nsec = max(1, min(999_999_999, math.ceil((when - seconds) * 1e9)))
        if _LIBC.timerfd_settime(self.fd, _TFD_TIMER_ABSTIME, ctypes.byref(self._spec), None) < 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"timerfd_settime: {os.strerror(errno)}")

    def doRead(self) -> None:
        """The timer expired: take the expiry count and fire (a stale wake reads nothing)."""
        try:
            os.read(self.fd, 8)
        except BlockingIOError:
            return
        self._when = None
        self.fire()

    def fileno(self) -> int:
        return self.fd

    def logPrefix(self) -> str:
        return "wall-alarm" if self.wall else "hold-alarm"

    def connectionLost(self, reason: Any) -> None:
        self.close()

    def close(self) -> None:
        if self.fd < 0:
            return
        self.reactor.removeReader(self)
        os.close(self.fd)
        self.fd = -1


def precise_alarm(reactor: Any, fire: Callable[[], None]) -> Alarm:
    """The most precise alarm at a reactor time ``reactor`` supports: a timerfd on its clock on
    Linux with a real reactor, else ``callLater`` (logged, since holds then end up to a millisecond late)."""
    if IReactorFDSet.providedBy(reactor) and _LIBC is not None:
        try:
            return TimerfdAlarm(reactor, fire, wall=getattr(reactor, "seconds", time.monotonic) is not time.monotonic)
        except OSError as exc:
            log.warn("hold deadlines fall back to the reactor's millisecond timers: {error}", error=exc)
    return ClockAlarm(reactor, fire)


def wall_alarm(reactor: Any, wall: Callable[[], float], fire: Callable[[], None]) -> Alarm:
    """An alarm at a wall-clock time: a ``CLOCK_REALTIME`` timerfd when ``wall`` is the machine's
    (``time.time``) under a real reactor on Linux, else a ``WallAlarm`` reading ``wall``."""
    if wall is time.time and IReactorFDSet.providedBy(reactor) and _LIBC is not None:
        try:
            return TimerfdAlarm(reactor, fire, wall=True)
        except OSError as exc:
            log.warn("wall-clock alarms fall back to the reactor's timers: {error}", error=exc)
    return WallAlarm(reactor, wall, fire)


class Deadlines:
    """A server's alarms, so that a deadline that comes due while a read is handled is kept ahead
    of the read's remaining frames: a connection calls ``poll`` after each request. Without it a
    due deadline waits for the whole read, and for every other socket the same ``epoll`` round
    reported ready, before the reactor reads the timerfd (a millisecond or more under load)."""

    def __init__(self, clock: Callable[[], float], make: Callable[[Callable[[], None]], Alarm]) -> None:
        self.clock = clock
        self._make = make
        self._alarms: list[_Listed] = []
        self.earliest = math.inf  # the earliest armed time of any alarm; inf when none is armed
        self.early_fires = 0  # alarms fired by ``poll`` ahead of their own wake-up

    def alarm(self, fire: Callable[[], None]) -> Alarm:
        """A new alarm calling ``fire``, made by ``make`` and watched by ``poll``."""
        listed = _Listed(self, fire)
        listed.inner = self._make(listed.woke)
        self._alarms.append(listed)
        return listed

    def poll(self) -> None:
        """Fire every alarm whose time has come. Connections call it only once ``earliest`` has
        passed (their own check, one clock read per request), so it does not check that again."""
        now = self.clock()
        for listed in list(self._alarms):
            when = listed.when
            if when is not None and when <= now:
                self.early_fires += 1
                listed.set(None)  # disarm the inner alarm first: its own wake-up would fire twice
                listed.fire()

    def changed(self) -> None:
        """An alarm was set, fired or closed: recompute ``earliest``."""
        self.earliest = min((a.when for a in self._alarms if a.when is not None), default=math.inf)

    def forget(self, listed: _Listed) -> None:
        self._alarms.remove(listed)
        self.changed()


class _Listed:
    """An alarm of a ``Deadlines``: the inner alarm, with its armed time in sight of ``poll``."""

    inner: Alarm

    def __init__(self, board: Deadlines, fire: Callable[[], None]) -> None:
        self.board = board
        self.fire = fire
        self.when: float | None = None

    def set(self, when: float | None) -> None:
        if when == self.when:
            return
        self.when = when
        self.inner.set(when)
        self.board.changed()

    def woke(self) -> None:
        """The inner alarm fired on its own."""
        self.when = None
        self.board.changed()
        self.fire()

    def close(self) -> None:
        self.inner.close()
        self.when = None
        self.board.forget(self)


__all__ = ["Alarm", "ClockAlarm", "Deadlines", "TimerfdAlarm", "WallAlarm", "precise_alarm", "wall_alarm"]
