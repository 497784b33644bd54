"""The broker's own statistics, as a 4.9 broker keeps them for mqadmin (docs/operations.md, Statistics).

Two tables, both fed by the hooks that feed the Prometheus metrics (``on_put``, ``on_pull``,
``on_send_back``) and sampled by the server's periodic tasks; samples are stamped on the injected
wall clock (as the reference's, and local midnight is a wall-clock time):

- Stats items (the reference's ``BrokerStatsManager``/``StatsItem``): per item name and key a
  running ``value`` and ``times``, sampled every 10 s (the last 7 samples: the minute window),
  every 10 min (7: the hour) and every hour (25: the day). A window's ``sum`` is its last value
  minus its first, ``tps`` that per second of the window's span, ``avgpt`` sum per time. Names
  and keys are the reference's: ``TOPIC_PUT_*`` by topic, ``GROUP_GET_*`` and ``SNDBCK_PUT_NUMS``
  by ``topic@group``, ``BROKER_*`` by cluster name. VIEW_BROKER_STATS_DATA (315) reads them, and
  GET_CONSUME_STATS' ``consumeTps`` is the minute tps of ``GROUP_GET_NUMS``.
- Store throughput (the reference's ``StoreStatsService``): the store's put and get totals and
  the counts of pulls that found messages and of pulls that found none, sampled every second
  (the last 601), for the runtime info's ``putTps``, ``getFoundTps``, ``getMissTps``,
  ``getTotalTps`` and ``getTransferedTps`` over 10, 60 and 600 s; the longest pull service time
  (``getMessageEntireTimeMax``); and the totals at each local midnight
  (``msg*TotalTodayMorning``/``YesterdayMorning``). The store's put times
  (``store/puttimes.py``) move to their next minute on this clock too.

The send path pays one dict lookup and five integer additions per put: a key's items are made on
its first event, and at most ``max_keys`` keys are kept (past that, a new topic or topic@group is
counted only in the ``BROKER_*`` totals, and that is logged once).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import deque
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from twisted.logger import Logger

from ..core.clocks import Wall

from .store.puttimes import PERIOD_S as PUT_TIMES_PERIOD_S

log = Logger()

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
GROUP_GET_LATENCY = "GROUP_GET_LATENCY"
SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"
#: The item names kept. The reference's GROUP_GET_FROM_DISK_*, BROKER_GET_FROM_DISK_*, QUEUE_* and
#: COMMERCIAL_* are not: rmqproxy does not tell disk reads from memory ones, and no tool reads the rest.
ITEM_NAMES = (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, GROUP_GET_NUMS, GROUP_GET_SIZE, GROUP_GET_LATENCY, SNDBCK_PUT_NUMS,
              BROKER_PUT_NUMS, BROKER_GET_NUMS)  # fmt: skip

#: (sampling period in seconds, samples kept) of the minute, hour and day windows.
MINUTE = (10.0, 7)
HOUR = (600.0, 7)
DAY = (3600.0, 25)
#: The store throughput: one sample a second, 601 kept (600 s back from the last).
STORE_SAMPLE_S = 1.0
STORE_SAMPLES = 601
STORE_WINDOWS_S = (10, 60, 600)
#: The sample columns ``store_tps`` reads: messages put, pulls that found messages, messages
#: pulled, pulls that found none.
PUTS, FOUND, TRANSFERRED, MISSED = 1, 2, 3, 4
#: A pull answered with one of these read the store and found nothing (the reference's
#: ``getMessageTimesTotalMiss``); refusals (permission, subscription) never read it.
MISS_CODES = frozenset({"PULL_NOT_FOUND", "PULL_RETRY_IMMEDIATELY", "PULL_OFFSET_MOVED"})


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """One window of one item: the reference's ``StatsSnapshot``."""

    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0
    times: int = 0


class StatsItem:
    """One name and key: running totals and their sampled windows (``(ms, times, value)`` each)."""

    __slots__ = ("value", "times", "minute", "hour", "day")

    def __init__(self) -> None:
        self.value = 0
        self.times = 0
        self.minute: deque[tuple[int, int, int]] = deque(maxlen=MINUTE[1])
        self.hour: deque[tuple[int, int, int]] = deque(maxlen=HOUR[1])
        self.day: deque[tuple[int, int, int]] = deque(maxlen=DAY[1])

    def sample(self, window: deque, now_ms: int, period_s: float) -> None:
        """Add a sample; a window's first one comes after a zero one a period earlier, as in the reference."""
        if not window:
            window.append((now_ms - int(period_s * 1000), 0, 0))
        window.append((now_ms, self.times, self.value))

    def in_minute(self) -> Snapshot:
        return window_snapshot(self.minute)

    def in_hour(self) -> Snapshot:
        return window_snapshot(self.hour)

    def in_day(self) -> Snapshot:
        return window_snapshot(self.day)


def window_snapshot(window: deque) -> Snapshot:
    """Sum, tps and avgpt between a window's first and last samples (zeros before any)."""
    if not window:
        return Snapshot()
    first_ms, first_times, first_value = window[0]
    last_ms, last_times, last_value = window[-1]
    total = last_value - first_value
    span = last_ms - first_ms
    times = last_times - first_times
    return Snapshot(total, total * 1000.0 / span if span > 0 else 0.0, total / times if times > 0 else 0.0, times)


def java_double(value: float) -> str:
    """``Double.toString``: plain between 10^-3 and 10^7, else ``d.dddEn``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(float(value))
    sign, digits, exponent = Decimal(repr(float(value))).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    power = len(digits) - 1 + int(exponent)
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{power}"


def java_fixed(value: float, digits: int) -> str:
    """``String.format("%.<digits>f", value)``: Java rounds the shortest decimal form half up."""
    return str(Decimal(repr(float(value))).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def human_bytes(count: int) -> str:
    """``MixAll.humanReadableByteCount(count, false)``: ``"512 B"``, ``"1.5 KiB"``, ``"2.0 GiB"``."""
    if count < 1024:
        return f"{count} B"
    exp = int(math.log(count) / math.log(1024))
    return f"{java_fixed(count / float(1024**exp), 1)} {'KMGTPE'[exp - 1]}iB"


def next_midnight(now_s: float) -> float:
    """The epoch second of the next local midnight after ``now_s`` (the reference's ``computeNextMorningTimeMillis``)."""
    day = time.localtime(now_s)
    return time.mktime((day.tm_year, day.tm_mon, day.tm_mday + 1, 0, 0, 0, 0, 0, -1))


class BrokerStats:
    """The stats items and the store throughput samples of one broker (see the module doc)."""

    def __init__(
        self, *, cluster: str, wall: Wall, store: Any, max_keys: int = 10_000,
    ) -> None:  # fmt: skip
        self.wall = wall  # sample times and midnights: wall-clock epoch seconds
        self.cluster = cluster
        self.max_keys = max_keys
        self.store = store  # its put_count, get_count (messages stored and pulled since start), put_times
        self.items: dict[str, dict[str, StatsItem]] = {name: {} for name in ITEM_NAMES}
        self.keys = 0  # topic and topic@group keys kept (broker totals not counted)
        self._warned = False
        self._overflow = (StatsItem(), StatsItem(), StatsItem())  # counts of keys past the bound, never read
        self._topic_put: dict[str, tuple[StatsItem, StatsItem]] = {}
        self._group_get: dict[tuple[str, str], tuple[StatsItem, StatsItem, StatsItem]] = {}
        self.broker_put = self.items[BROKER_PUT_NUMS].setdefault(cluster, StatsItem())
        self.broker_get = self.items[BROKER_GET_NUMS].setdefault(cluster, StatsItem())
        self.found = 0  # pulls that found messages (the reference's getMessageTimesTotalFound)
        self.missed = 0  # pulls that read the store and found none (getMessageTimesTotalMiss)
        self.longest_pull_ms = 0  # the longest pull service time, hold excluded (getMessageEntireTimeMax)
        self.store_samples: deque[tuple[int, int, int, int, int]] = deque(maxlen=STORE_SAMPLES)
        self.put_today_morning = self.put_yesterday_morning = 0
        self.get_today_morning = self.get_yesterday_morning = 0
        self._midnight = next_midnight(wall())  # when the day totals are next snapshot

    # --- hooks (reactor thread) -------------------------------------------------------------

    def on_put(self, topic: str, messages: int, size: int, delayed: bool) -> None:
        """Messages were stored for a producer (the metrics' ``on_put``)."""
        items = self._topic_put.get(topic)
        if items is None:
            items = self._topic_items(topic)
        nums, sizes = items
        nums.value += messages
        nums.times += 1
        sizes.value += size
        sizes.times += 1
        self.broker_put.value += messages

    def on_pull(self, event: Any, broker: str = "") -> None:
        """A pull was answered (the metrics' ``on_pull``): one that read the store counts as found
        or missed and towards the longest service time, one that found messages in its items too."""
        if not event.msgs and event.code not in MISS_CODES:
            return  # refused before reading
        self.longest_pull_ms = max(self.longest_pull_ms, int(event.service_ms))
        if not event.msgs:
            self.missed += 1
            return
        items = self._group_get.get((event.topic, event.group))
        if items is None:
            items = self._group_items(event.topic, event.group)
        nums, sizes, latency = items
        nums.value += event.msgs
        nums.times += 1
        sizes.value += event.bytes
        sizes.times += 1
        latency.value += int(event.service_ms)
        latency.times += 1
        self.broker_get.value += event.msgs
        self.found += 1

    def on_send_back(self, group: str, topic: str) -> None:
        """A consumer gave a message of ``topic`` back for a retry, and it was stored."""
        key = f"{topic}@{group}"
        table = self.items[SNDBCK_PUT_NUMS]
        item = table.get(key)
        if item is None:
            if not self._room(key):
                return
            item = table[key] = StatsItem()
        item.value += 1
        item.times += 1

    def _room(self, key: str) -> bool:
        if self.keys < self.max_keys:
            self.keys += 1
            return True
        if not self._warned:
            self._warned = True
            log.warn("broker statistics keep at most {max} topic and topic@group keys (maxStatsKeys); {key} and "
                     "later ones count only in BROKER_PUT_NUMS and BROKER_GET_NUMS", max=self.max_keys, key=key)  # fmt: skip
        return False

    def _topic_items(self, topic: str) -> tuple[StatsItem, StatsItem]:
        if not self._room(topic):
            return self._overflow[0], self._overflow[1]
        items = (self.items[TOPIC_PUT_NUMS].setdefault(topic, StatsItem()),
                 self.items[TOPIC_PUT_SIZE].setdefault(topic, StatsItem()))  # fmt: skip
        self._topic_put[topic] = items
        return items

    def _group_items(self, topic: str, group: str) -> tuple[StatsItem, StatsItem, StatsItem]:
        key = f"{topic}@{group}"
        if not self._room(key):
            return self._overflow
        items = (self.items[GROUP_GET_NUMS].setdefault(key, StatsItem()),
                 self.items[GROUP_GET_SIZE].setdefault(key, StatsItem()),
                 self.items[GROUP_GET_LATENCY].setdefault(key, StatsItem()))  # fmt: skip
        self._group_get[(topic, group)] = items
        return items

    def forget_topic(self, topic: str) -> None:
        """A deleted topic's items go, as the reference's ``onTopicDeleted`` drops them."""
        prefix = topic + "@"
        for name, table in self.items.items():
            if name in (BROKER_PUT_NUMS, BROKER_GET_NUMS):
                continue
            for key in [k for k in table if k == topic or k.startswith(prefix)]:
                del table[key]
        self._topic_put.pop(topic, None)
        for pair in [p for p in self._group_get if p[0] == topic]:
            del self._group_get[pair]
        self._recount()

    def _recount(self) -> None:
        self.keys = sum(len(self.items[name]) for name in (TOPIC_PUT_NUMS, GROUP_GET_NUMS, SNDBCK_PUT_NUMS))

    # --- reading --------------------------------------------------------------------------

    def item(self, name: str, key: str) -> StatsItem | None:
        """The item of ``name`` and ``key``, or None if there is none (yet)."""
        table = self.items.get(name)
        return table.get(key) if table is not None else None

    def group_get_tps(self, group: str, topic: str) -> float:
        """Messages per second pulled by ``group`` from ``topic`` over the last minute (``tpsGroupGetNums``)."""
        item = self.items[GROUP_GET_NUMS].get(f"{topic}@{group}")
        return item.in_minute().tps if item is not None else 0.0

    def store_tps(self, column: int) -> str:
        """One store rate over 10, 60 and 600 s as the runtime info writes it (a window not yet
        sampled is empty, as on the reference). ``column``: ``PUTS``, ``FOUND``, ``TRANSFERRED``
        or ``MISSED``."""
        rates = (self._rate(column, span) for span in STORE_WINDOWS_S)
        return " ".join("" if rate is None else java_double(rate) for rate in rates)

    def get_total_tps(self) -> str:
        """Pulls per second, found plus missed, over 10, 60 and 600 s (``getTotalTps``: the
        reference writes 0.0 for a window not yet sampled here)."""
        return " ".join(java_double((self._rate(FOUND, span) or 0.0) + (self._rate(MISSED, span) or 0.0))
                        for span in STORE_WINDOWS_S)  # fmt: skip

    def _rate(self, column: int, span: int) -> float | None:
        """Per second over the last ``span`` samples (``CallSnapshot.getTPS``), or None before
        there are that many."""
        samples = self.store_samples
        if len(samples) <= span:
            return None
        first, last = samples[-(span + 1)], samples[-1]
        elapsed = last[0] - first[0]
        return (last[column] - first[column]) / elapsed * 1000 if elapsed > 0 else 0.0

    # --- sampling ---------------------------------------------------------------------------

    def periodic(self) -> list[tuple[float, Callable[[], None]]]:
        """(interval in seconds, task) the server runs on its clock: the samplings (the store's,
        every second, also snapshots the day totals once a local midnight has passed) and the
        store's put times moving to their next minute."""
        return [(STORE_SAMPLE_S, self.sample_store), (MINUTE[0], self.sample_minute), (HOUR[0], self.sample_hour),
                (DAY[0], self.sample_day), (PUT_TIMES_PERIOD_S, self.store.put_times.rotate)]  # fmt: skip

    def _now_ms(self) -> int:
        return int(self.wall() * 1000)

    def _sample(self, window: str, period: float) -> None:
        now_ms = self._now_ms()
        for table in self.items.values():
            for item in table.values():
                item.sample(getattr(item, window), now_ms, period)

    def sample_minute(self) -> None:
        self._sample("minute", MINUTE[0])

    def sample_hour(self) -> None:
        self._sample("hour", HOUR[0])

    def sample_day(self) -> None:
        self._sample("day", DAY[0])

    def sample_store(self) -> None:
        now = self.wall()
        store = self.store
        self.store_samples.append((int(now * 1000), store.put_count, self.found, store.get_count, self.missed))
        if now >= self._midnight:
            self.record_morning()
            self._midnight = next_midnight(now)

    def record_morning(self) -> None:
        """Today's morning totals become yesterday's, and the totals now today's (``BrokerStats.record``)."""
        self.put_yesterday_morning, self.get_yesterday_morning = self.put_today_morning, self.get_today_morning
        self.put_today_morning, self.get_today_morning = self.store.put_count, self.store.get_count
        log.info("yesterday put {put} messages, and pulls got {got}",
                 put=self.put_today_morning - self.put_yesterday_morning,
                 got=self.get_today_morning - self.get_yesterday_morning)  # fmt: skip
