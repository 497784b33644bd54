"""Proxy mode against a direct connection to the same Apache RocketMQ broker; prints ONE JSON
report (figures and machine), asserts nothing.

One Apache RocketMQ 4.9.7 name server and broker (the reference's own start-script JVM flags: 8 GiB
G1 broker heap, full JIT; 1 GiB commit-log files, as ``bench/e2e.py --reference``) and one
``rmqproxy proxy`` in front of it (``lockReleaseOnDisconnect=immediate``, every other key at its
default: pull event log ``all``, metrics on, /metrics scraped every ``--scrape-interval`` (1) s
while the proxy is measured, as ``bench/e2e.py`` does, and each scrape timed: the proxy renders it
on its reactor thread). Every figure is measured on both paths to that one broker:

- ``direct``: clients use the broker's name server (Java) or the broker's port (Python);
- ``proxy``: clients use the proxy's name-server port (Java) or its listener for the broker (Python).

in ``--pairs`` pairs; within a pair each workload runs on both paths back to back, and the path
that goes first alternates from pair to pair. Each pair is reported, with the median over pairs.
Load: the real Java 4.9.8 client (``bench/java/E2eBench.java``, as ``bench/e2e.py`` runs it; every
JVM warms up for ``--warmup`` s with the measured workload on another topic before anything counts)
and a Python asyncio client on the codec (``bench/hold.py``'s) for the pull figures.

1. added send latency: sync sends of 1 KiB from ONE thread (``--latency-messages``): p50 and p99
   through the proxy minus direct, per pair (targets: p50 <= 0.3 ms, p99 <= 1 ms); the same
   differences from the 16-thread run of (2);
2. sync send throughput, 16 threads, 1 KiB, ``--messages`` messages: proxy / direct msgs/s (>= 0.8);
3. drain: a push consumer reading that backlog from the first offset: proxy / direct msgs/s (>= 0.8);
4. hold overshoot of idle pulls: ``--idle-pulls`` pulls, each on its own queue, about one a
   millisecond over 10 connections, suspended 1 s, 5 s and 15 s; client-observed answer time minus
   (write time + suspend): p50/p99/max (target p99 through the proxy <= 10 ms; a 4.9.7 broker
   checks its held pulls every 5 s, so direct is up to +5 s). Proxy side also from its pull log;
5. wake latency: a pull held (15 s suspend), then, 3 ms later, a sync send to its queue on another
   connection of the same path; the held pull's answer minus the send's answer at the client,
   p50/p99/max over ``--wakes`` (after 100 not counted) (target p99 through the proxy <= 1 ms);
6. orderly handoff after kill -9 of one of two orderly consumers (real Java consumers in their own
   JVMs, a producer at 50 msgs/s on 8 queues: ``tests/interop/orderly.run_handoffs``), through the
   proxy ``--kills`` times: time from the kill until the survivor consumed from every one of the
   dead consumer's queues (target <= 1 s); direct 4.9.7 (the broker's 60 s lock expiry) measured
   ``--direct-handoff once`` or not at all (``skip``, the JSON says so);
7. ``--held`` (10,000) pulls held at once (30 s suspend) over 10 connections, 100 queues x 100
   groups: proxy RSS while they are held (target <= 300 MB) and its idle CPU, then the time to
   wake them all with one message per queue; the same pulls direct, for the wake time.

Also: proxy and broker CPU per sent message in the send phases (user/sys from /proc, from the end
of the client's warm-up), the proxy's CPU while the direct path was measured (what it steals from
it), the proxy's peak RSS, lines of its log that look like trouble, and the machine
(``bench/machine.py``, with a speed probe at the start and at the end).

A shared machine: every run (one workload on one path) records ``foreign_cpu_share``, the cores'
worth of CPU that processes other than this benchmark's used meanwhile (``/proc/stat`` less its
own processes'). Before each run the benchmark waits (``--quiet-wait``, up to 600 s) for 5 s with
under 0.1 cores of it, and a run that saw 0.15 cores or more is run again (``--retries``, 2);
``figures.foreign_load`` lists the runs kept with foreign load (``sound`` is false if any).

Run: ``python bench/proxy.py [--pairs N] [--messages N] [--latency-messages N] [--warmup S]
[--idle-pulls N] [--suspends 1,5,15] [--wakes N] [--held N] [--kills N] [--direct-handoff once|skip]
[--phases latency,send,idle,wake,held,handoff] [--no-scrape | --scrape-interval S] [--quiet-wait S]
[--retries N]``; ``--quick`` shrinks every
default (2 pairs, 20,000 messages, ...; explicit options still win). On an idle 2-core machine
the defaults take about 30 minutes, ``--quick`` about 10 (plus any waits for other jobs).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
import traceback
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from e2e import Scraper, current_rss, proc_stats, run_java  # noqa: E402
from hold import Client, create_topic, pct  # noqa: E402
from machine import machine, speed_probe  # noqa: E402

from codec.codes import RequestCode as C  # noqa: E402
from tests.interop.apache_broker import REFERENCE_VERSION, SCRIPT_JVM, ApacheBroker  # noqa: E402
from tests.interop.apache_cluster import cluster_info, listed_masters  # noqa: E402
from tests.interop.oracle import ORACLE_LINES, build_classpath  # noqa: E402
from tests.interop.server import RunningProxy, free_port  # noqa: E402

PULL_NOT_FOUND = 19
TARGETS = {
    "added_send_latency_p50_ms": 0.3, "added_send_latency_p99_ms": 1.0, "send_throughput_ratio": 0.8,
    "drain_ratio": 0.8, "idle_overshoot_p99_ms": 10.0, "wake_latency_p99_ms": 1.0, "kill9_handoff_ms": 1000.0,
    "held_10k_rss_mb": 300.0,
}  # fmt: skip
#: A phase that saw this many cores' worth of other jobs' CPU is run again (and is not sound).
QUIET_CORES = 0.15
#: Before a phase, wait for a window with less foreign load than this.
QUIET_CORES_WAIT = 0.1
#: The workloads, in the order a pair runs them (``--phases``); ``handoff`` runs once, after the pairs.
PHASES = ("latency", "send", "idle", "wake", "held", "handoff")
QUICK = {"pairs": 2, "messages": 20_000, "latency_messages": 3_000, "warmup": 3, "idle_pulls": 200, "wakes": 300,
         "held": 10_000, "kills": 2, "direct_handoff": "skip"}  # fmt: skip
FULL = {"pairs": 4, "messages": 200_000, "latency_messages": 20_000, "warmup": 10, "idle_pulls": 1000, "wakes": 2000,
        "held": 10_000, "kills": 5, "direct_handoff": "once"}  # fmt: skip


@dataclass
class Side:
    """One path to the broker."""

    name: str  # "direct" or "proxy"
    namesrv: str  # what the Java clients are given
    broker: str  # what the Python client connects to (the broker, or the proxy's listener for it)
    proxy: RunningProxy | None  # the proxy, on the proxy side (its processes: ``proxy.pids``)


class TimedScraper(Scraper):
    """``e2e.Scraper`` (GET /metrics every ``interval`` s, as Prometheus would) that also times
    each scrape: the proxy renders /metrics on its one reactor thread, so a slow scrape delays
    everything else it does meanwhile, held pulls' deadline answers included."""

    def __init__(self, port: int, off: bool, interval: float) -> None:
        super().__init__(port, off)
        self.interval = interval
        self.ms: list[float] = []
        self.bytes = 0

    def _run(self) -> None:
        while not self.stop.wait(self.interval):
            started = time.perf_counter()
            with urllib.request.urlopen(self.url, timeout=10) as response:
                self.bytes = len(response.read())
            self.ms.append((time.perf_counter() - started) * 1000)

    def summary(self) -> dict:
        if not self.ms:
            return {}
        return {"scrapes": len(self.ms), "scrape_ms_p50": round(statistics.median(self.ms), 1),
                "scrape_ms_max": round(max(self.ms), 1), "scrape_bytes": self.bytes}  # fmt: skip


class LoadMeter:
    """CPU the whole machine spent (``/proc/stat``) against what this benchmark's own processes
    spent (itself, its finished client JVMs, the broker and name-server JVMs, the proxy): the rest
    is foreign load, another user's jobs, which makes any figure taken meanwhile unsound."""

    def __init__(self, pids: Callable[[], list[int]]) -> None:
        self.pids = pids

    def snapshot(self) -> tuple[float, float, float]:
        """(monotonic time, machine busy CPU seconds, this benchmark's CPU seconds)."""
        ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
        busy = (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait
        t = os.times()
        mine = t.user + t.system + t.children_user + t.children_system
        for pid in self.pids():
            try:
                mine += sum(proc_stats(pid)[:2])
            except OSError:
                pass
        return time.monotonic(), busy, mine

    def foreign_share(self, since: tuple[float, float, float]) -> float:
        """Cores' worth of foreign CPU since ``since`` (a snapshot); 0 on an otherwise idle machine."""
        now = self.snapshot()
        return round(max(0.0, (now[1] - since[1]) - (now[2] - since[2])) / max(now[0] - since[0], 1e-3), 3)

    def wait_quiet(self, max_s: float, threshold: float = QUIET_CORES_WAIT, window_s: float = 10.0) -> dict:
        """Wait (up to ``max_s``) for a ``window_s`` in which foreign load stays under ``threshold``
        cores; return how long it took and the last window's load."""
        started = time.monotonic()
        while True:
            since = self.snapshot()
            time.sleep(window_s)
            share = self.foreign_share(since)
            waited = time.monotonic() - started
            if share < threshold or waited >= max_s:
                return {"waited_s": round(waited), "last_window_foreign_cores": share, "quiet": share < threshold}


class Bench:
    def __init__(self, args: argparse.Namespace, broker: ApacheBroker, proxy: RunningProxy, metrics_port: int,
                 classpath: str) -> None:  # fmt: skip
        self.args = args
        self.broker = broker
        self.proxy = proxy
        self.metrics_port = metrics_port
        self.classpath = classpath
        proxied = listed_masters(cluster_info(proxy.namesrv))[ApacheBroker.BROKER_NAME]
        self.direct = Side("direct", broker.namesrv, broker.broker_addr, None)
        self.via = Side("proxy", proxy.namesrv, proxied, proxy)
        self.proxy_restarts: list[str] = []
        self.load = LoadMeter(lambda: [broker.broker_pid, broker._namesrv.pid, *self.proxy.pids])
        self.waited_s = 0.0  # waiting for other jobs to finish

    # --- plumbing ---------------------------------------------------------------------------

    def guarded(self, what: str, fn: Callable[[], dict]) -> dict:
        """Run one measurement; a failure is recorded in the report, not raised (a long run keeps
        its other figures). A proxy that died is noted and started again."""
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 (reported, not hidden)
            return {"error": f"{type(exc).__name__}: {exc}"[-3000:], "traceback": traceback.format_exc()[-2000:]}
        finally:
            if not self.proxy.alive():
                self.proxy_restarts.append(f"after {what}: proxy exited; log tail: {self.proxy.log_tail(1500)}")
                self.proxy.start()

    def scraping(self, side: Side) -> TimedScraper:
        return TimedScraper(self.metrics_port, side.name != "proxy" or self.args.no_scrape, self.args.scrape_interval)

    def cpu(self) -> dict:
        """CPU seconds so far: the broker's, and the proxy's (its user and kernel time apart)."""
        broker_user, broker_sys, _ = proc_stats(self.broker.broker_pid)
        proxy_user, proxy_sys = processes_cpu(self.proxy.pids)
        return {"broker": broker_user + broker_sys, "proxy_user": proxy_user, "proxy_sys": proxy_sys}

    # --- (1)-(3): Java sends and drain ------------------------------------------------------

    def send(self, side: Side, topic: str, messages: int, threads: int) -> dict:
        start = {"cpu": self.cpu(), "t": time.perf_counter()}

        def warmed() -> None:
            start["cpu"], start["t"] = self.cpu(), time.perf_counter()

        with self.scraping(side) as scraper:
            result = run_java(self.classpath, "send", side.namesrv, topic, str(messages), str(threads),
                              str(self.args.warmup), on_warm=warmed)  # fmt: skip
        result.update(scraper.summary())
        end, seconds = self.cpu(), time.perf_counter() - start["t"]
        cpu = {k: end[k] - start["cpu"][k] for k in end}
        result["broker_cpu_us_per_msg"] = round(cpu["broker"] / messages * 1e6, 1)
        if side.name == "proxy":
            result["proxy_cpu_us_per_msg"] = round((cpu["proxy_user"] + cpu["proxy_sys"]) / messages * 1e6, 1)
            result["proxy_user_us_per_msg"] = round(cpu["proxy_user"] / messages * 1e6, 1)
            result["proxy_sys_us_per_msg"] = round(cpu["proxy_sys"] / messages * 1e6, 1)
            result["proxy_cpu_share"] = round((cpu["proxy_user"] + cpu["proxy_sys"]) / seconds, 3)
        else:  # the idle proxy's CPU while the direct path ran: what it took from that side
            result["idle_proxy_cpu_s"] = round(cpu["proxy_user"] + cpu["proxy_sys"], 3)
        result["broker_cpu_share"] = round(cpu["broker"] / seconds, 3)
        result["topic"] = topic
        return result

    def drain(self, side: Side, topic: str, total: int) -> dict:
        before, started = self.cpu(), time.perf_counter()
        with self.scraping(side) as scraper:
            result = run_java(self.classpath, "drain", side.namesrv, topic, str(total), "1")
        result.update(scraper.summary())
        after, seconds = self.cpu(), time.perf_counter() - started
        result["broker_cpu_s"] = round(after["broker"] - before["broker"], 2)
        if side.name == "proxy":
            result["proxy_cpu_s"] = round(after["proxy_user"] + after["proxy_sys"] - before["proxy_user"]
                                          - before["proxy_sys"], 2)  # fmt: skip
            result["proxy_cpu_share"] = round(result["proxy_cpu_s"] / seconds, 3)
        result["topic"] = topic
        return result

    # --- (4), (5), (7): Python pull clients -------------------------------------------------

    def idle_overshoot(self, side: Side, topic: str, suspend_s: float) -> dict:
        with self.scraping(side) as scraper:
            result = asyncio.run(idle_overshoot(side.broker, topic, self.args.idle_pulls, suspend_s))
        result.update(scraper.summary())
        if side.name == "proxy":
            time.sleep(1.2)  # the proxy flushes its pull log every 0.5 s
            events = [e for e in self.proxy.pull_events() if e["topic"] == topic]
            late = [e["total_ms"] - e["suspend_ms"] for e in events if e["wake"] == "timeout"]
            result["proxy_log"] = {"events": len(events), "wakes": dict(Counter(e["wake"] for e in events))}
            if late:
                result["proxy_log"].update({"overshoot_ms_p50": pct(late, 0.5), "overshoot_ms_p99": pct(late, 0.99),
                                            "overshoot_ms_max": round(max(late), 3)})  # fmt: skip
        return result

    def wake(self, side: Side, topic: str) -> dict:
        with self.scraping(side) as scraper:
            result = asyncio.run(wake_latency(side.broker, topic, self.args.wakes))
        result.update(scraper.summary())
        if side.name == "proxy":
            time.sleep(1.2)
            events = [e for e in self.proxy.pull_events() if e["topic"] == topic]
            result["proxy_log_wakes"] = dict(Counter(e["wake"] for e in events))
        return result

    def many_held(self, side: Side, topic: str) -> dict:
        with self.scraping(side) as scraper:
            result = asyncio.run(many_held(side, topic, self.args.held, self.broker.broker_pid))
        return {**result, **scraper.summary()}

    # --- (6): orderly handoff ---------------------------------------------------------------

    def handoffs(self, workdir: Path) -> dict:
        from tests.interop.orderly import compile_programs, run_handoffs

        classpath = compile_programs("4.9", workdir / "classes")
        out: dict = {}
        if self.args.quiet_wait > 0:
            out["waited_for_quiet"] = self.load.wait_quiet(self.args.quiet_wait)
        departures = [("clean", 0.0)] + [("kill", 0.5)] * self.args.kills
        started = time.monotonic()
        since = self.load.snapshot()
        out["proxy"] = self.guarded("proxy handoffs", lambda: summarize_handoffs(run_handoffs(
            classpath, self.proxy.namesrv, workdir / "proxy", mode="immediate", departures=departures,
            topic="PxOrderlyProxy", pull_log_dir=self.proxy.workdir / "pulls", timeout=90.0)))  # fmt: skip
        out["proxy"]["seconds"] = round(time.monotonic() - started)
        out["proxy"]["foreign_cpu_share"] = self.load.foreign_share(since)
        if self.args.direct_handoff == "once":
            started = time.monotonic()
            since = self.load.snapshot()
            out["direct"] = self.guarded("direct handoff", lambda: summarize_handoffs(run_handoffs(
                classpath, self.broker.namesrv, workdir / "direct", mode="apache-default",
                departures=[("clean", 0.0), ("kill", 0.5)], topic="PxOrderlyDirect", timeout=200.0)))  # fmt: skip
            out["direct"]["seconds"] = round(time.monotonic() - started)
            out["direct"]["foreign_cpu_share"] = self.load.foreign_share(since)
            out["direct"]["note"] = "measured once (one warm-up clean stop, then one kill -9)"
        else:
            out["direct"] = {
                "measured": False,
                "reason": "skipped (--direct-handoff skip): a 4.9.7 broker keeps a dead consumer's queue locks "
                "until 60 s after their last renewal, and the survivor retries on its 20 s rebalance, so one "
                "kill takes 40-80 s; run with --direct-handoff once to measure it",
            }  # fmt: skip
        return out

    # --- the run ----------------------------------------------------------------------------

    def pair(self, i: int) -> dict:
        args = self.args
        order = [self.direct, self.via] if i % 2 == 0 else [self.via, self.direct]
        pair: dict = {"order": [s.name for s in order]}

        def each(label: str, fn: Callable[[Side, str], dict]) -> dict:
            """``fn(side, tag)`` on both paths in this pair's order; ``tag`` makes topic names unique.
            A side whose run saw foreign load (other jobs' CPU) is run again, up to ``--retries``
            times, each run after waiting for the machine to be quiet."""
            started = time.monotonic()
            out: dict = {}
            for s in order:
                discarded = []
                for attempt in range(1 + args.retries):
                    if args.quiet_wait > 0:
                        quiet = self.load.wait_quiet(args.quiet_wait, window_s=5.0)
                        self.waited_s += quiet["waited_s"]
                    since = self.load.snapshot()
                    result = self.guarded(f"{label} ({s.name}, pair {i})", lambda s=s, a=attempt: fn(s, f"{s.name}{i}a{a}"))
                    # the run's own figure, or the worst of its parts' (send_and_drain's)
                    result["foreign_cpu_share"] = max(self.load.foreign_share(since), result.get("foreign_cpu_share", 0.0))
                    if result["foreign_cpu_share"] < QUIET_CORES or attempt == args.retries:
                        break
                    discarded.append(result["foreign_cpu_share"])
                if discarded:
                    result["runs_discarded_for_foreign_load_cores"] = discarded
                out[s.name] = result
            out["seconds"] = round(time.monotonic() - started)
            return out

        phases = args.phases
        if "latency" in phases:
            pair["latency_1_thread"] = each(
                "1-thread send", lambda s, tag: self.send(s, f"PxLat{tag}", args.latency_messages, 1))

        def send_and_drain(s: Side, tag: str) -> dict:
            """The 16-thread send, then the drain of what it sent (one unit: a drain cannot be run
            again, its consumer group has committed its offsets)."""
            since = self.load.snapshot()
            sent = self.guarded(f"16-thread send ({s.name}, pair {i})", lambda: self.send(s, f"PxSend{tag}", args.messages, 16))
            sent["foreign_cpu_share"] = self.load.foreign_share(since)
            if "error" in sent:
                return {"send": sent, "drain": {"error": "the send phase failed"}}
            since = self.load.snapshot()
            drained = self.drain(s, sent["topic"], args.messages - sent["failed"])
            drained["foreign_cpu_share"] = self.load.foreign_share(since)
            return {"send": sent, "drain": drained,
                    "foreign_cpu_share": max(sent["foreign_cpu_share"], drained["foreign_cpu_share"])}  # fmt: skip

        both = each("16-thread send and drain", send_and_drain) if "send" in phases else {}
        for figure, part in (("send_16_threads", "send"), ("drain", "drain")) if both else ():
            pair[figure] = {s.name: {**both[s.name].get(part, both[s.name]),
                                     **{k: v for k, v in both[s.name].items()
                                        if k not in ("send", "drain", "foreign_cpu_share")}}
                            for s in order}  # fmt: skip
            pair[figure]["seconds"] = both["seconds"]
        if "idle" in phases:
            pair["idle_overshoot"] = {
                f"{suspend:g}s": each(f"idle {suspend:g}s", lambda s, tag, t=suspend: self.idle_overshoot(
                    s, f"PxIdle{t:g}{tag}", t))
                for suspend in args.suspends
            }  # fmt: skip
        if "wake" in phases:
            pair["wake_latency"] = each("wake", lambda s, tag: self.wake(s, f"PxWake{tag}"))
        if "held" in phases:
            pair["held"] = each("held", lambda s, tag: self.many_held(s, f"PxHeld{tag}"))
        pair["proxy_rss_mb"] = round(largest_rss(self.proxy.pids) / 1e6, 1)
        return pair


# --- Python pull clients ----------------------------------------------------------------------


async def idle_overshoot(address: str, topic: str, pulls: int, suspend_s: float, connections: int = 10) -> dict:
    """``pulls`` pulls, each on a queue of its own of an empty topic, one about every millisecond,
    held for ``suspend_s``: answer time minus (write + suspend), at the client."""
    clients = [await Client.connect(address) for _ in range(connections)]
    try:
        await create_topic(clients[0], topic, pulls)
        futures, written = [], []
        for q in range(pulls):
            futures.append(clients[q % connections].pull(topic, q, 0, int(suspend_s * 1000), group="px-idle"))
            written.append(time.perf_counter())
            await asyncio.sleep(0.001)
        results = await asyncio.wait_for(asyncio.gather(*futures), timeout=suspend_s + 60)
    finally:
        for client in clients:
            await client.close()
    late = [(answered - sent - suspend_s) * 1000 for (answered, _), sent in zip(results, written, strict=True)]
    codes = Counter(response.code for _, response in results)
    return {
        "pulls": pulls, "suspend_s": suspend_s, "arrival_spread_s": round(written[-1] - written[0], 2),
        "overshoot_ms_p50": pct(late, 0.5), "overshoot_ms_p99": pct(late, 0.99), "overshoot_ms_max": round(max(late), 3),
        "overshoot_ms_min": round(min(late), 3), "codes": {str(k): v for k, v in codes.items()},
    }  # fmt: skip


async def wake_latency(address: str, topic: str, wakes: int, warm: int = 100, gap_s: float = 0.003) -> dict:
    """A pull held on the queue's next offset; ``gap_s`` later a send to that queue on another
    connection; the pull's answer arriving minus the send's answer arriving (negative: the pull's
    came first)."""
    puller, sender = await Client.connect(address), await Client.connect(address)
    latencies, bad = [], Counter()
    try:
        await create_topic(sender, topic, 1)
        offset = 0
        for n in range(warm + wakes):
            held = puller.pull(topic, 0, offset, 15000, group="px-wake")
            await asyncio.sleep(gap_s)
            (acked, sent), (answered, pulled) = await asyncio.wait_for(
                asyncio.gather(sender.send(topic, 0), held), timeout=30)  # fmt: skip
            if sent.code != 0 or pulled.code != 0:
                bad[f"send {sent.code} / pull {pulled.code}"] += 1
                offset = int((pulled.ext_fields or {}).get("nextBeginOffset", offset)) if pulled.code != 0 else offset
                continue
            offset = int(pulled.ext_fields["nextBeginOffset"])
            if n >= warm:
                latencies.append((answered - acked) * 1000)
    finally:
        await puller.close()
        await sender.close()
    out: dict = {"wakes": len(latencies), "not_counted_warm_up": warm}
    if latencies:
        out.update({"latency_ms_p50": pct(latencies, 0.5), "latency_ms_p99": pct(latencies, 0.99),
                    "latency_ms_max": round(max(latencies), 3), "latency_ms_min": round(min(latencies), 3)})  # fmt: skip
    if bad:
        out["unexpected_answers"] = dict(bad)
    return out


def processes_cpu(pids: list[int]) -> tuple[float, float]:
    """User and kernel CPU seconds of ``pids`` together (a proxy's supervisor and its workers)."""
    user = system = 0.0
    for pid in pids:
        u, k, _ = proc_stats(pid)
        user, system = user + u, system + k
    return user, system


def largest_rss(pids: list[int]) -> int:
    """The largest resident set of ``pids``: a proxy's per-worker memory figure."""
    return max(current_rss(pid) for pid in pids)


async def many_held(side: Side, topic: str, held: int, broker_pid: int, connections: int = 10,
                    queues: int = 100) -> dict:  # fmt: skip
    """``held`` pulls (30 s suspend) over ``connections``, ``queues`` queues x held/queues groups,
    each on the queue's next offset (one message sent to every queue first, so every queue's files
    exist); the proxy's RSS and idle CPU while they are held; then one message per queue wakes them.
    Few queues, many groups: a 4.9.7 broker creates a queue's first consume-queue file (6 MB,
    mapped) on its one dispatch thread, and on the 2-core VM this was written on 1,000 new queues
    kept that thread from dispatching anything else for 30 s to over 100 s."""
    clients = [await Client.connect(side.broker) for _ in range(connections)]
    sender = await Client.connect(side.broker)
    out: dict = {"held": held, "connections": connections, "queues": queues, "suspend_s": 30}
    try:
        await create_topic(sender, topic, queues)
        await asyncio.gather(*(sender.send(topic, q) for q in range(queues)))
        await dispatched(sender, topic, queues, 1)  # else a pull of offset 1 is answered OFFSET_MOVED
        if side.proxy is not None:
            out["proxy_rss_mb_before"] = round(largest_rss(side.proxy.pids) / 1e6, 1)
        futures = [clients[i % connections].pull(topic, i % queues, 1, 30_000, group=f"px-held-{i // queues}")
                   for i in range(held)]  # fmt: skip
        await asyncio.sleep(3)  # all sent and held by now
        early = sum(f.done() for f in futures)
        idle_s = 5.0
        cpu0 = processes_cpu(side.proxy.pids) if side.proxy is not None else (0.0, 0.0)
        broker0 = sum(proc_stats(broker_pid)[:2])
        await asyncio.sleep(idle_s)
        broker1 = sum(proc_stats(broker_pid)[:2])
        out["answered_before_wake"] = early
        out["broker_idle_cpu_share"] = round((broker1 - broker0) / idle_s, 4)
        if side.proxy is not None:
            cpu1 = processes_cpu(side.proxy.pids)
            out["proxy_rss_mb_held"] = round(largest_rss(side.proxy.pids) / 1e6, 1)
            out["proxy_idle_cpu_share"] = round((sum(cpu1) - sum(cpu0)) / idle_s, 4)
        started = time.perf_counter()
        await asyncio.gather(*(sender.send(topic, q) for q in range(queues)))
        results = await asyncio.wait_for(asyncio.gather(*futures), timeout=60)
        out["wake_all_s"] = round(time.perf_counter() - started, 3)
        out["codes"] = {str(k): v for k, v in Counter(r.code for _, r in results).items()}
        if side.proxy is not None:
            out["proxy_rss_mb_after_wake"] = round(largest_rss(side.proxy.pids) / 1e6, 1)
            out["proxy_peak_rss_mb"] = round(max(proc_stats(pid)[2] for pid in side.proxy.pids) / 1e6, 1)
    finally:
        for client in [*clients, sender]:
            await client.close()
    return out


async def dispatched(client: Client, topic: str, queues: int, offset: int, timeout_s: float = 30.0) -> None:
    """Wait until every queue's max offset is at least ``offset``: an Apache broker acknowledges a
    send once it is in the commit log and dispatches it to its queue a moment later."""
    deadline = time.monotonic() + timeout_s
    waiting = list(range(queues))
    while waiting:
        answers = await asyncio.gather(*(client.request(C.GET_MAX_OFFSET, {"topic": topic, "queueId": str(q)})
                                         for q in waiting))  # fmt: skip
        waiting = [q for q, (_, a) in zip(waiting, answers, strict=True)
                   if a.code != 0 or int((a.ext_fields or {}).get("offset", 0)) < offset]  # fmt: skip
        if waiting and time.monotonic() > deadline:
            raise TimeoutError(f"{len(waiting)} queues of {topic} not at offset {offset} after {timeout_s:.0f} s")
        if waiting:
            await asyncio.sleep(0.05)


# --- summaries --------------------------------------------------------------------------------


def summarize_handoffs(handoffs: list) -> dict:
    """Per kill: the time until the survivor consumed from every queue of the dead consumer (the
    slowest of its queues), and the same for the delay the handoff added to a message."""
    events: dict[int, list] = defaultdict(list)
    for h in handoffs:
        events[h.event].append(h)
    kills = []
    for event, rows in sorted(events.items()):
        kind = rows[0].kind
        if kind != "kill":
            continue
        takeovers = [h.takeover_ms for h in rows if h.takeover_ms is not None]
        kills.append({
            "event": event, "queues": len(rows),
            "all_queues_consumed_ms": round(max(h.first_consume_ms for h in rows), 1),
            "first_queue_consumed_ms": round(min(h.first_consume_ms for h in rows), 1),
            "handoff_ms_max": round(max(h.handoff_ms for h in rows), 1),
            **({"takeover_ms_max": round(max(takeovers), 1)} if takeovers else {}),
        })  # fmt: skip
    warm = [h for h in handoffs if h.event == 0]
    out: dict = {"kills": kills, "warm_up_clean_stop_ms": round(max(h.first_consume_ms for h in warm), 1) if warm else None}
    if kills:
        values = [k["all_queues_consumed_ms"] for k in kills]
        out.update({"all_queues_consumed_ms_median": round(statistics.median(values), 1),
                    "all_queues_consumed_ms_max": round(max(values), 1)})  # fmt: skip
    return out


def value(pair: dict, figure: str, side: str, key: str) -> float | None:
    entry = pair.get(figure, {}).get(side, {})
    return entry.get(key) if isinstance(entry, dict) else None


def median(values: list[float | None]) -> float | None:
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 3) if values else None


def worst(values: list[float | None], high: bool = True) -> float | None:
    values = [v for v in values if v is not None]
    return round((max if high else min)(values), 3) if values else None


def summarize(pairs: list[dict], handoff: dict, args: argparse.Namespace) -> dict:
    fig: dict = {}

    def added(figure: str) -> dict:
        rows = []
        for p in pairs:
            d50, p50 = value(p, figure, "direct", "p50_ms"), value(p, figure, "proxy", "p50_ms")
            d99, p99 = value(p, figure, "direct", "p99_ms"), value(p, figure, "proxy", "p99_ms")
            rows.append({"direct_p50_ms": d50, "proxy_p50_ms": p50, "direct_p99_ms": d99, "proxy_p99_ms": p99,
                         "added_p50_ms": None if None in (d50, p50) else round(p50 - d50, 3),
                         "added_p99_ms": None if None in (d99, p99) else round(p99 - d99, 3)})  # fmt: skip
        return {"pairs": rows, "added_p50_ms_median": median([r["added_p50_ms"] for r in rows]),
                "added_p99_ms_median": median([r["added_p99_ms"] for r in rows]),
                "added_p50_ms_worst_pair": worst([r["added_p50_ms"] for r in rows]),
                "added_p99_ms_worst_pair": worst([r["added_p99_ms"] for r in rows])}  # fmt: skip

    one, sixteen = added("latency_1_thread"), added("send_16_threads")
    fig["1_added_send_latency"] = {
        "single_thread": one, "16_threads": sixteen,
        "targets_ms": {"p50": TARGETS["added_send_latency_p50_ms"], "p99": TARGETS["added_send_latency_p99_ms"]},
        "met_by_median": _met(one["added_p50_ms_median"], TARGETS["added_send_latency_p50_ms"])
        and _met(one["added_p99_ms_median"], TARGETS["added_send_latency_p99_ms"]),
        "met_in_every_pair": _met(one["added_p50_ms_worst_pair"], TARGETS["added_send_latency_p50_ms"])
        and _met(one["added_p99_ms_worst_pair"], TARGETS["added_send_latency_p99_ms"]),
        "judged_on": "single-thread sends (the 16-thread differences include queueing for 2 cores)",
    }  # fmt: skip

    def ratio(figure: str, target: float) -> dict:
        rows = []
        for p in pairs:
            d, x = value(p, figure, "direct", "msgs_per_s"), value(p, figure, "proxy", "msgs_per_s")
            rows.append({"direct_msgs_per_s": d, "proxy_msgs_per_s": x,
                         "ratio": round(x / d, 3) if d and x is not None else None})  # fmt: skip
        ratios = [r["ratio"] for r in rows]
        return {"pairs": rows, "ratio_median": median(ratios), "ratio_worst_pair": worst(ratios, high=False),
                "target": target, "met_by_median": _met(median(ratios), target, higher=True)}  # fmt: skip

    fig["2_send_throughput_16_threads_1KiB"] = ratio("send_16_threads", TARGETS["send_throughput_ratio"])
    fig["3_drain_from_first_offset"] = ratio("drain", TARGETS["drain_ratio"])

    overshoot: dict = {}
    for suspend in args.suspends:
        key = f"{suspend:g}s"
        rows = []
        for p in pairs:
            entry = p.get("idle_overshoot", {}).get(key, {})
            d = entry.get("direct", {}).get("overshoot_ms_p99")
            x = entry.get("proxy", {}).get("overshoot_ms_p99")
            proxy_side = entry.get("proxy", {})
            rows.append({"direct_p99_ms": d, "proxy_p99_ms": x,
                         "proxy_p50_ms": proxy_side.get("overshoot_ms_p50"),
                         "proxy_max_ms": proxy_side.get("overshoot_ms_max"),
                         "proxy_log_p99_ms": proxy_side.get("proxy_log", {}).get("overshoot_ms_p99"),
                         "proxy_scrape_ms_max": proxy_side.get("scrape_ms_max"),
                         "ratio": round(x / d, 5) if d and x is not None else None})  # fmt: skip
        overshoot[key] = {"pairs": rows, "proxy_p99_ms_median": median([r["proxy_p99_ms"] for r in rows]),
                          "proxy_p99_ms_worst_pair": worst([r["proxy_p99_ms"] for r in rows]),
                          "direct_p99_ms_median": median([r["direct_p99_ms"] for r in rows]),
                          "ratio_median": median([r["ratio"] for r in rows])}  # fmt: skip
    fig["4_idle_pull_hold_overshoot"] = {
        **overshoot, "target_proxy_p99_ms": TARGETS["idle_overshoot_p99_ms"],
        "met_by_median": all(_met(o["proxy_p99_ms_median"], TARGETS["idle_overshoot_p99_ms"]) for o in overshoot.values()),
        "met_in_every_pair": all(_met(o["proxy_p99_ms_worst_pair"], TARGETS["idle_overshoot_p99_ms"])
                                 for o in overshoot.values()),
    }  # fmt: skip

    rows = [{"direct_p99_ms": value(p, "wake_latency", "direct", "latency_ms_p99"),
             "proxy_p99_ms": value(p, "wake_latency", "proxy", "latency_ms_p99"),
             "direct_p50_ms": value(p, "wake_latency", "direct", "latency_ms_p50"),
             "proxy_p50_ms": value(p, "wake_latency", "proxy", "latency_ms_p50")} for p in pairs]  # fmt: skip
    fig["5_wake_latency"] = {
        "pairs": rows, "proxy_p99_ms_median": median([r["proxy_p99_ms"] for r in rows]),
        "proxy_p99_ms_worst_pair": worst([r["proxy_p99_ms"] for r in rows]),
        "direct_p99_ms_median": median([r["direct_p99_ms"] for r in rows]),
        "target_proxy_p99_ms": TARGETS["wake_latency_p99_ms"],
        "met_by_median": _met(median([r["proxy_p99_ms"] for r in rows]), TARGETS["wake_latency_p99_ms"]),
    }  # fmt: skip

    proxy_handoff = handoff.get("proxy", {})
    fig["6_orderly_handoff_after_kill9"] = {
        "proxy_immediate": {k: proxy_handoff.get(k) for k in
                            ("all_queues_consumed_ms_median", "all_queues_consumed_ms_max", "error") if k in proxy_handoff},
        "direct": {k: v for k, v in handoff.get("direct", {}).items() if k != "kills"} | (
            {"all_queues_consumed_ms": handoff["direct"]["kills"][0]["all_queues_consumed_ms"]}
            if handoff.get("direct", {}).get("kills") else {}),
        "target_ms": TARGETS["kill9_handoff_ms"],
        "met_by_worst_kill": _met(proxy_handoff.get("all_queues_consumed_ms_max"), TARGETS["kill9_handoff_ms"]),
        "measure": "kill -9 until the survivor consumed from every queue of the dead consumer (includes the wait "
                   "for the producer's next message for a queue, up to 160 ms at 50 msgs/s on 8 queues)",
    }  # fmt: skip

    rss = [value(p, "held", "proxy", "proxy_rss_mb_held") for p in pairs]
    fig["7_held_pulls_proxy_rss"] = {
        "held": args.held, "proxy_rss_mb_held_per_pair": rss,
        "proxy_rss_mb_before_per_pair": [value(p, "held", "proxy", "proxy_rss_mb_before") for p in pairs],
        "proxy_idle_cpu_share_per_pair": [value(p, "held", "proxy", "proxy_idle_cpu_share") for p in pairs],
        "wake_all_s_per_pair": {side: [value(p, "held", side, "wake_all_s") for p in pairs]
                                for side in ("direct", "proxy")},
        "proxy_rss_mb_held_max": worst(rss), "target_mb": TARGETS["held_10k_rss_mb"],
        "met": _met(worst(rss), TARGETS["held_10k_rss_mb"]),
    }  # fmt: skip

    cpu: dict = {}
    for figure in ("latency_1_thread", "send_16_threads"):
        cpu[figure] = {
            key: median([value(p, figure, "proxy", key) for p in pairs])
            for key in ("proxy_cpu_us_per_msg", "proxy_user_us_per_msg", "proxy_sys_us_per_msg", "proxy_cpu_share")
        }  # fmt: skip
        cpu[figure]["broker_cpu_us_per_msg"] = {
            side: median([value(p, figure, side, "broker_cpu_us_per_msg") for p in pairs]) for side in ("direct", "proxy")
        }  # fmt: skip
        cpu[figure]["idle_proxy_cpu_s_during_direct"] = median(
            [value(p, figure, "direct", "idle_proxy_cpu_s") for p in pairs])  # fmt: skip
    fig["proxy_cpu_per_sent_message"] = cpu

    shares = dict(_walk_shares({"pairs": pairs, "orderly_handoff": handoff}))
    loaded = {path: share for path, share in shares.items() if share >= QUIET_CORES}
    fig["foreign_load"] = {
        "max_cpu_share": max(shares.values(), default=None), f"phases_at_or_over_{QUIET_CORES}_cores": loaded,
        "sound": not loaded,
        "note": "cores' worth of CPU used by processes other than this benchmark's while each phase ran; the "
                "figures of a phase with foreign load are not sound (they compete for the same 2 cores)",
    }  # fmt: skip
    return fig


def _walk_shares(node: object, path: str = ""):
    """(path, foreign_cpu_share) of every measured phase in a pair or handoff tree."""
    if isinstance(node, dict):
        for key, child in node.items():
            if key == "foreign_cpu_share" and isinstance(child, float | int):
                yield path, child
            else:
                yield from _walk_shares(child, f"{path}/{key}" if path else str(key))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            yield from _walk_shares(child, f"{path}/{index}")


def _met(measured: float | None, target: float, higher: bool = False) -> bool | None:
    if measured is None:
        return None
    return measured >= target if higher else measured <= target


TROUBLE = re.compile(r"traceback|unhandled|error|exception|fail|warn|critical|refus|busy", re.IGNORECASE)


def log_trouble(path: Path, limit: int = 40) -> dict:
    """Lines of the proxy's log that look like trouble: how many, and the first ``limit``."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return {"lines": 0}
    bad = [line for line in lines if TROUBLE.search(line)]
    return {"log_lines": len(lines), "lines": len(bad), "first": bad[:limit]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"small defaults: {QUICK}")
    parser.add_argument("--pairs", type=int)
    parser.add_argument("--messages", type=int, help="16-thread sends (and the drained backlog) per run")
    parser.add_argument("--latency-messages", type=int, help="single-thread sends per run")
    parser.add_argument("--warmup", type=int, help="seconds each Java sender warms up before measuring")
    parser.add_argument("--idle-pulls", type=int, help="pulls per idle-overshoot run")
    parser.add_argument("--suspends", default="1,5,15", help="suspend times (s) of the idle-overshoot runs")
    parser.add_argument("--wakes", type=int)
    parser.add_argument("--held", type=int)
    parser.add_argument("--kills", type=int, help="kill -9 handoffs through the proxy")
    parser.add_argument("--direct-handoff", choices=("once", "skip"))
    parser.add_argument("--phases", default=",".join(PHASES),
                        help=f"the workloads to run, of {','.join(PHASES)} (default: all); the figures of the "
                        "others are null")  # fmt: skip
    parser.add_argument("--workers", type=int, default=1,
                        help="the proxy's worker processes (its --workers; 1: one process, as before)")
    parser.add_argument("--no-scrape", action="store_true", help="do not scrape the proxy's /metrics")
    parser.add_argument("--scrape-interval", type=float, default=1.0,
                        help="seconds between scrapes of the proxy's /metrics while it is measured (e2e.py: 1)")
    parser.add_argument("--quiet-wait", type=float, default=600.0,
                        help=f"before each run, wait up to this many seconds for other jobs' CPU to fall under "
                        f"{QUIET_CORES_WAIT} cores (0: do not wait)")  # fmt: skip
    parser.add_argument("--retries", type=int, default=2,
                        help=f"runs again a run that saw {QUIET_CORES} cores or more of other jobs' CPU, this often")
    args = parser.parse_args(argv)
    for key, default in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, default)
    args.suspends = [float(x) for x in args.suspends.split(",")]
    args.phases = [x.strip() for x in args.phases.split(",") if x.strip()]
    if unknown := set(args.phases) - set(PHASES):
        parser.error(f"unknown phases {sorted(unknown)}: choose from {','.join(PHASES)}")
    began = time.monotonic()
    report: dict = {
        "benchmark": "proxy", "date": time.strftime("%Y-%m-%d %H:%M"), "machine": machine(),
        "settings": {k: v for k, v in vars(args).items()},
        "client": f"Java {ORACLE_LINES['4.9']} (E2eBench) for sends and drains and orderly consumers; Python asyncio "
                  "codec client for the pull figures",
        "broker": f"Apache RocketMQ {REFERENCE_VERSION}, the reference's start-script JVM flags, 1 GiB commit-log files",
        "proxy": f"rmqproxy proxy --workers {args.workers}, lockReleaseOnDisconnect=immediate, pull log all, metrics on"
                 + ("" if args.no_scrape else f", /metrics scraped every {args.scrape_interval:g} s while the proxy "
                    "is measured"),
        "targets": TARGETS,
    }  # fmt: skip
    classpath = build_classpath("4.9")
    metrics_port = free_port()
    conf = {"mappedFileSizeCommitLog": str(1 << 30)}
    with ApacheBroker(message_delay_level=None, broker_conf=conf, jvm=SCRIPT_JVM) as broker, RunningProxy(
        broker.namesrv, proxy_conf={"lockReleaseOnDisconnect": "immediate", "metricsPromExporterPort": str(metrics_port),
                                    "workers": str(args.workers)}
    ) as proxy, tempfile.TemporaryDirectory(prefix="proxybench-") as tmp:  # fmt: skip
        bench = Bench(args, broker, proxy, metrics_port, classpath)
        report["paths"] = {s.name: {"namesrv": s.namesrv, "broker": s.broker} for s in (bench.direct, bench.via)}
        pairs = []
        for i in range(args.pairs):
            started = time.monotonic()
            pairs.append(bench.pair(i))
            pairs[-1]["seconds"] = round(time.monotonic() - started)
            print(f"pair {i + 1} of {args.pairs} done: {json.dumps(pairs[-1])}", file=sys.stderr, flush=True)
        started = time.monotonic()
        handoff = bench.handoffs(Path(tmp)) if "handoff" in args.phases else {}
        handoff["seconds"] = round(time.monotonic() - started)
        report["figures"] = summarize(pairs, handoff, args)
        report["pairs"] = pairs
        report["orderly_handoff"] = handoff
        report["waited_for_quiet_s"] = round(bench.waited_s)
        report["proxy_process"] = {
            "processes": len(proxy.pids), "peak_rss_mb_per_process": round(max(proc_stats(p)[2] for p in proxy.pids) / 1e6, 1),
            "rss_mb_at_end_per_process": round(largest_rss(proxy.pids) / 1e6, 1),
            "cpu_s_total": round(sum(processes_cpu(proxy.pids)), 1), "restarts": bench.proxy_restarts,
            "log": log_trouble(proxy.log_path),
        }  # fmt: skip
    report["speed_probe_ms_at_end"] = speed_probe()
    report["seconds"] = round(time.monotonic() - began)
    print(json.dumps(report, indent=2), flush=True)


if __name__ == "__main__":
    main()
