"""Delay levels: messages sent with ``DELAY=n`` wait in ``SCHEDULE_TOPIC_XXXX`` queue ``n - 1``.

As in RocketMQ's ``ScheduleMessageService``: the parked record keeps its real topic and queue in
``REAL_TOPIC``/``REAL_QID``, its consume-queue tags code holds the delivery time (epoch ms), and
every level's queue is delivered in order, since all its messages wait equally long. Delivery
offsets per level survive restarts in ``config/delayOffset.json``.
"""

from __future__ import annotations

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
#: 5.x timer messages wait here (``rmqproxy/broker/timer_messages.py``); their tags code is ``TIMER_OUT_MS``.
TIMER_TOPIC = "rmq_sys_wheel_timer"
DEFAULT_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_UNITS_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_levels(text: str) -> list[int]:
    """``messageDelayLevel`` text to per-level delays in ms (level n is element n - 1)."""
    levels = []
    for word in text.split():
        unit = _UNITS_MS.get(word[-1:])
        if unit is None or not word[:-1].isdigit():
            raise ValueError(f"delay level {word!r} is not a number followed by s, m, h or d")
        levels.append(int(word[:-1]) * unit)
    if not levels:
        raise ValueError("no delay levels")
    return levels
