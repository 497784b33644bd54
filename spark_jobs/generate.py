"""Synthetic pull/hold event logs for tests and benchmarks, shaped like ``rmqproxy serve`` output.

What it owns: a small simulation of consumers pulling from an rmqproxy broker, written as JSONL
lines with exactly the fields, order and types of ``rmqproxy.observe.pull_events.PullEvent`` (docs/operations.md,
"The pull event log"), into hourly files named as the server names them (``pulls-YYYYMMDD-HH-generated_10911-0.jsonl``,
UTC hour of ``ts_ms``; ``.jsonl.gz`` with ``gzip=True``), lines in answer order.

Invariants:
- Deterministic: the same ``seed``, ``events``, ``start_ms``, ``mode`` and profiles give the same
  bytes. Every topic's arrival process and every (group, queue) consumer has its own
  ``random.Random`` seeded from ``(seed, name)``, so adding a group does not change the others.
- The simulation mirrors the server (rmqproxy/broker/processors/pull.py, rmqproxy/core/hold.py):
  * a pull that finds messages is answered at once: ``held`` false, ``wake`` "none", code
    ``SUCCESS``, service time a fraction of a ms to a few ms (a slow tail of ~1%);
  * a suspendable pull on a caught-up queue is held; a message for that queue wakes it
    (``wake`` "arrival", hold = arrival time - hold start, plus a sub-ms wake delay) and it
    answers ``SUCCESS`` with what has arrived by then (batches arrive together);
  * a held pull nothing arrives for ends at its deadline (``wake`` "timeout", ``PULL_NOT_FOUND``)
    with 0-2 ms overshoot; the deadline is the client's ``suspend_ms`` (15000 for the Java push
    consumer, 20000 for lite pull / Go clients) in long mode, ``short_polling_ms`` in short mode;
  * a pull without the suspend flag (``suspend_ms`` 0) on a caught-up queue answers
    ``PULL_NOT_FOUND`` at once, and that client polls again after ``poll_interval_ms``;
  * a client restart drops its held pull (``wake`` "disconnect", code ``NO_RESPONSE``, nothing
    returned, ``max_offset`` 0) and reconnects from a new port a few seconds later;
  * with ``shutdown=True`` the log ends with the server stopping: every pull held then answers
    with ``wake`` "shutdown".
- Producers are bursty: each topic alternates "on" periods (high rate, messages often sent in
  batches that arrive together) and "off" periods (a trickle or nothing), exponential lengths;
  messages spread uniformly over the topic's queues. Every group subscribed to a topic sees the
  same arrivals.

Use: ``python -m spark_jobs.generate --events 100000 --out DIR [--seed 7] [--gzip]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import gzip as gzip_module
import hashlib
import heapq
import itertools
import json
import math
import random
import sys
import time
from collections import deque
from collections.abc import Iterator, Sequence
from pathlib import Path

#: 2024-05-13 20:00:00 UTC: a log that crosses midnight UTC after four hours (two date partitions).
DEFAULT_START_MS = 1_715_630_400_000
JAVA_PUSH_SUSPEND_MS = 15_000  # DefaultMQPushConsumerImpl BROKER_SUSPEND_MAX_TIME_MILLIS (4.9.8)
LITE_PULL_SUSPEND_MS = 20_000  # DefaultLitePullConsumer brokerSuspendMaxTimeMillis default (4.9.8)
SHORT_POLLING_MS = 1_000  # the server's default shortPollingTimeMills
#: Stored-record overhead per message in a pull body: the fixed fields of the message layout
#: (message v1, IPv4 hosts: 4+4+4+4+4+8+8+4+8+8+8+4+8+4+8) plus length prefixes and properties.
RECORD_OVERHEAD_BYTES = 91 + 2 + 4 + 60


@dataclasses.dataclass(frozen=True)
class Traffic:
    """A topic's producers: on/off periods (exponential, mean seconds) and rates (msgs/s)."""

    on_rate: float
    off_rate: float
    on_mean_s: float
    off_mean_s: float
    batch_mean: float = 1.0  # mean messages per send (geometric); batches arrive together


@dataclasses.dataclass(frozen=True)
class Group:
    """A consumer group on one topic: its clients split the topic's queues between them."""

    group: str
    topic: str
    clients: int
    suspend_ms: int  # 0: a plain pull consumer without the suspend flag
    max_msgs: int = 32
    body_bytes: int = 512  # median message body
    consume_ms: float = 0.3  # client turnaround between an answer and its next pull (median)
    poll_interval_ms: int = 1000  # only for suspend_ms == 0
    slow_queue: int | None = None  # this queue's reads are slow (cold pages): service x slow_factor
    slow_factor: float = 8.0
    restart_every_s: float = 0.0  # mean seconds between client restarts (0: never)


@dataclasses.dataclass(frozen=True)
class Topic:
    name: str
    queues: int
    traffic: Traffic


def default_profile() -> tuple[list[Topic], list[Group]]:
    """Several groups on bursty, steady, rare and idle topics (~330k events per simulated hour)."""
    topics = [
        Topic("orders", 8, Traffic(on_rate=300, off_rate=2, on_mean_s=60, off_mean_s=120, batch_mean=4)),
        Topic("payments", 4, Traffic(on_rate=25, off_rate=15, on_mean_s=300, off_mean_s=300)),
        Topic("notifications", 8, Traffic(on_rate=800, off_rate=0, on_mean_s=10, off_mean_s=290, batch_mean=16)),
        Topic("audit", 4, Traffic(on_rate=0.05, off_rate=0.005, on_mean_s=600, off_mean_s=600)),
        Topic("inventory", 2, Traffic(on_rate=5, off_rate=0, on_mean_s=30, off_mean_s=600)),
        Topic("%RETRY%order-push", 1, Traffic(on_rate=0.5, off_rate=0.02, on_mean_s=60, off_mean_s=240)),
    ]
    groups = [
        Group("order-push", "orders", clients=2, suspend_ms=JAVA_PUSH_SUSPEND_MS, slow_queue=3, restart_every_s=7200),
        Group("order-audit", "orders", clients=1, suspend_ms=LITE_PULL_SUSPEND_MS, max_msgs=64, body_bytes=512,
              consume_ms=1.5),
        Group("payments-push", "payments", clients=2, suspend_ms=JAVA_PUSH_SUSPEND_MS, body_bytes=1200),
        Group("notify-push", "notifications", clients=3, suspend_ms=JAVA_PUSH_SUSPEND_MS, body_bytes=300,
              restart_every_s=3600),
        Group("audit-lite", "audit", clients=1, suspend_ms=LITE_PULL_SUSPEND_MS, body_bytes=2000),
        Group("inventory-poll", "inventory", clients=1, suspend_ms=0, max_msgs=16, poll_interval_ms=5000),
        Group("order-push", "%RETRY%order-push", clients=2, suspend_ms=JAVA_PUSH_SUSPEND_MS),
    ]  # fmt: skip
    return topics, groups


def _seed(seed: int, *names: object) -> int:
    digest = hashlib.sha256(repr((seed, *names)).encode()).digest()
    return int.from_bytes(digest[:8], "big")


def arrivals(topic: Topic, queue_id: int, seed: int, start_ms: float) -> Iterator[float]:
    """Arrival times (epoch ms, non-decreasing) of messages on one queue of ``topic``.

    The on/off schedule comes from the topic's own generator (the same for all queues); sends go
    to a uniformly chosen queue, so each queue sees a thinned share, whole batches at a time.
    """
    schedule = random.Random(_seed(seed, "schedule", topic.name))
    sends = random.Random(_seed(seed, "sends", topic.name, queue_id))
    traffic = topic.traffic
    t = start_ms
    on = schedule.random() < traffic.on_mean_s / (traffic.on_mean_s + traffic.off_mean_s)
    while True:
        mean_s = traffic.on_mean_s if on else traffic.off_mean_s
        end = t + schedule.expovariate(1 / mean_s) * 1000
        rate = traffic.on_rate if on else traffic.off_rate
        # sends per second to this queue: the message rate over the mean batch, over the queues
        send_rate = rate / traffic.batch_mean / topic.queues
        if send_rate > 0:
            while True:
                t += sends.expovariate(send_rate) * 1000
                if t >= end:
                    break
                size = 1 if traffic.batch_mean <= 1 else 1 + int(sends.expovariate(1 / (traffic.batch_mean - 1)))
                for _ in range(size):
                    yield t
        t = end
        on = not on


class _Clock:
    """Service-time draws: lognormal body, ~1% slow tail (GC, page faults), in ms."""

    def __init__(self, rng: random.Random, factor: float) -> None:
        self.rng = rng
        self.factor = factor

    def read_ms(self, msgs: int) -> float:
        rng = self.rng
        ms = rng.lognormvariate(math.log(0.12 + 0.015 * msgs), 0.35)
        if rng.random() < 0.01:
            ms *= rng.uniform(5, 40)
        return ms * self.factor


def consumer(
    group: Group, topic: Topic, queue_id: int, seed: int, start_ms: float, mode: str, short_polling_ms: int
) -> Iterator[tuple]:
    """One client's pulls on one queue, in answer order: tuples in PullEvent field order."""
    rng = random.Random(_seed(seed, "consumer", group.group, topic.name, queue_id))
    clock = _Clock(rng, group.slow_factor if queue_id == group.slow_queue else 1.0)
    client = queue_id % group.clients
    host = f"10.0.{1 + sum(map(ord, group.group)) % 200}.{10 + client}"
    pid = 1000 + _seed(seed, "pid", group.group, client) % 60000
    client_id = f"{host}@{pid}"
    port = 40000 + rng.randrange(20000)
    incoming = arrivals(topic, queue_id, seed, start_ms)
    pending: deque[float] = deque()  # arrival times of messages not yet returned, oldest first
    next_arrival = next(incoming)
    base = rng.randrange(0, 2_000_000)
    offset = base  # next offset to consume == messages returned so far + base
    stored = base  # max offset: messages readable so far
    deadline_ms = group.suspend_ms if mode == "long" else short_polling_ms
    restart_at = start_ms + rng.expovariate(1 / group.restart_every_s) * 1000 if group.restart_every_s else math.inf
    t = start_ms + rng.uniform(0, 1000)

    def readable(now: float) -> None:
        nonlocal next_arrival, stored
        while next_arrival <= now:
            pending.append(next_arrival)
            stored += 1
            next_arrival = next(incoming)

    while True:
        arrived = t
        readable(arrived)
        remote = f"{host}:{port}"
        if pending:
            n = min(len(pending), group.max_msgs)
            service = clock.read_ms(n)
            for _ in range(n):
                pending.popleft()
            offset += n
            size = n * (RECORD_OVERHEAD_BYTES + len(topic.name) + int(rng.lognormvariate(math.log(group.body_bytes), 0.3)))
            total = service
            yield (arrived, total, remote, client_id, offset - n, False, 0.0, service, "none", "SUCCESS", n, size,
                   offset, stored)  # fmt: skip
            t = arrived + total + rng.lognormvariate(math.log(group.consume_ms), 0.5)
            continue
        first_read = clock.read_ms(0)
        if group.suspend_ms == 0:
            yield (arrived, first_read, remote, client_id, offset, False, 0.0, first_read, "none", "PULL_NOT_FOUND", 0,
                   0, offset, stored)  # fmt: skip
            t = arrived + first_read + group.poll_interval_ms + rng.uniform(0, 5)
            continue
        hold_start = arrived + first_read
        deadline = hold_start + deadline_ms
        if restart_at < min(deadline, next_arrival):
            hold = restart_at - hold_start
            yield (arrived, first_read + hold, remote, client_id, offset, True, hold, first_read, "disconnect",
                   "NO_RESPONSE", 0, 0, offset, 0)  # fmt: skip
            t = restart_at + rng.uniform(2000, 6000)
            port = 40000 + rng.randrange(20000)
            restart_at = t + rng.expovariate(1 / group.restart_every_s) * 1000
            continue
        if next_arrival < deadline:
            woke = max(next_arrival, hold_start) + rng.uniform(0.02, 0.4)
            hold = woke - hold_start
            readable(woke)
            n = min(len(pending), group.max_msgs)
            for _ in range(n):
                pending.popleft()
            offset += n
            service = first_read + clock.read_ms(n)
            size = n * (RECORD_OVERHEAD_BYTES + len(topic.name) + int(rng.lognormvariate(math.log(group.body_bytes), 0.3)))
            yield (arrived, hold + service, remote, client_id, offset - n, True, hold, service, "arrival", "SUCCESS",
                   n, size, offset, stored)  # fmt: skip
            t = arrived + hold + service + rng.lognormvariate(math.log(group.consume_ms), 0.5)
            continue
        hold = deadline_ms + rng.uniform(0.0, 2.0)
        readable(hold_start + hold)  # the re-read at the deadline answers what landed meanwhile
        n = min(len(pending), group.max_msgs)
        for _ in range(n):
            pending.popleft()
        offset += n
        service = first_read + clock.read_ms(n)
        size = n * (RECORD_OVERHEAD_BYTES + len(topic.name) + group.body_bytes)
        yield (arrived, hold + service, remote, client_id, offset - n, True, hold, service, "timeout",
               "SUCCESS" if n else "PULL_NOT_FOUND", n, size, offset, stored)  # fmt: skip
        t = arrived + hold + service + rng.uniform(0.05, 0.5)


_LINE = (
    '{"ts_ms":%d,"arrived_ms":%d,"group":%s,"topic":%s,"queue_id":%d,"client_id":%s,"remote":%s,'
    '"offset":%d,"max_msgs":%d,"suspend_ms":%d,"held":%s,"hold_ms":%r,"service_ms":%r,"total_ms":%r,'
    '"wake":"%s","mode":"%s","code":"%s","msgs":%d,"bytes":%d,"next_offset":%d,"max_offset":%d,"protocol":"remoting","instance":"%s"}\n'
)


def _keyed(sim: Iterator[tuple], quoted: tuple, queue_id: int) -> Iterator[tuple]:
    for e in sim:
        yield e[0] + e[1], e, quoted, queue_id


def events(
    n: int,
    *,
    seed: int = 7,
    start_ms: int = DEFAULT_START_MS,
    mode: str = "long",
    short_polling_ms: int = SHORT_POLLING_MS,
    profile: tuple[Sequence[Topic], Sequence[Group]] | None = None,
    shutdown: bool = False,
) -> Iterator[tuple[int, str]]:
    """The first ``n`` events in answer order, as ``(ts_ms, json_line)``."""
    if mode not in ("long", "short"):
        raise ValueError(f"mode must be long or short, not {mode!r}")
    topics, groups = profile if profile is not None else default_profile()
    by_name = {t.name: t for t in topics}
    streams = []
    for g in groups:
        topic = by_name[g.topic]
        quoted = (json.dumps(g.group), json.dumps(g.topic), g.max_msgs, g.suspend_ms)
        for q in range(topic.queues):
            streams.append(_keyed(consumer(g, topic, q, seed, start_ms, mode, short_polling_ms), quoted, q))
    merged = heapq.merge(*streams, key=lambda item: item[0])
    held_open: dict[tuple[str, str, int], tuple] = {}
    for done, e, quoted, q in itertools.islice(merged, n):
        arrived, total, remote, client_id, offset, held, hold, service, wake, code, msgs, size, nxt, mx = e
        group_json, topic_json, max_msgs, suspend_ms = quoted
        line = _LINE % (
            int(done), int(arrived), group_json, topic_json, q, json.dumps(client_id), json.dumps(remote), offset,
            max_msgs, suspend_ms, "true" if held else "false", round(hold, 3), round(service, 3), round(total, 3),
            wake, mode, code, msgs, size, nxt, mx, INSTANCE,
        )  # fmt: skip
        if shutdown:
            held_open[(group_json, topic_json, q)] = (done, e, quoted, q)
        yield int(done), line
    if shutdown:
        # The server stops just after the last answer: the pull each stream would issue next is
        # held then and answered with wake "shutdown" (hold = stop time - its arrival, no data).
        stop = max((item[0] for item in held_open.values()), default=start_ms) + 1.0
        for done, e, quoted, q in sorted(held_open.values(), key=lambda item: (item[0], item[3])):
            group_json, topic_json, max_msgs, suspend_ms = quoted
            _, _, remote, client_id, offset, _, _, _, _, _, msgs, _, nxt, mx = e
            if suspend_ms == 0:
                continue
            arrived = done + 0.2
            service = 0.15
            hold = max(0.0, stop - arrived - service)
            yield int(stop), _LINE % (
                int(stop), int(arrived), group_json, topic_json, q, json.dumps(client_id), json.dumps(remote), nxt,
                max_msgs, suspend_ms, "true", round(hold, 3), service, round(hold + service, 3), "shutdown", mode,
                "PULL_NOT_FOUND", 0, 0, nxt, mx, INSTANCE,
            )  # fmt: skip


#: The instance generated events name, and how their files name it (a server's advertised
#: ``host:port``, as ``rmqproxy/observe/log_files.py`` puts it in a file name).
INSTANCE = "generated:10911"
INSTANCE_FILE_PART = INSTANCE.replace(":", "_")


def file_name(ts_ms: int, gzip: bool = False) -> str:
    """The hourly file name a server gives an answer at ``ts_ms``
    (``pulls-YYYYMMDD-HH-<instance>-<n>.jsonl``, rmqproxy/observe/log_files.py), as the first file of its hour."""
    hour = time.strftime("%Y%m%d-%H", time.gmtime(ts_ms / 1000))
    return f"pulls-{hour}-{INSTANCE_FILE_PART}-0.jsonl" + (".gz" if gzip else "")


def write(out_dir: Path, n: int, *, gzip: bool = False, **options) -> list[Path]:
    """Write ``n`` events as hourly JSONL files under ``out_dir``; returns the files written."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, lines in itertools.groupby(events(n, **options), key=lambda item: file_name(item[0], gzip)):
        path = out_dir / name
        opener = functools.partial(gzip_module.open, compresslevel=1) if gzip else open
        with opener(path, "ab") as f:
            stream = (line for _, line in lines)
            while chunk := list(itertools.islice(stream, 8192)):
                f.write("".join(chunk).encode())
        if path not in written:
            written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spark_jobs.generate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, required=True, help="how many events to write")
    parser.add_argument("--out", type=Path, required=True, help="directory for pulls-YYYYMMDD-HH-generated_10911-0.jsonl files")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--start-ms", type=int, default=DEFAULT_START_MS, help="epoch ms of the first pull")
    parser.add_argument("--mode", choices=("long", "short"), default="long")
    parser.add_argument("--short-polling-ms", type=int, default=SHORT_POLLING_MS)
    parser.add_argument("--shutdown", action="store_true", help="end with the server stopping (wake=shutdown)")
    parser.add_argument("--gzip", action="store_true", help="write .jsonl.gz")
    args = parser.parse_args(argv)
    files = write(
        args.out, args.events, gzip=args.gzip, seed=args.seed, start_ms=args.start_ms, mode=args.mode,
        short_polling_ms=args.short_polling_ms, shutdown=args.shutdown,
    )  # fmt: skip
    print(f"wrote {args.events} events to {len(files)} files in {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
