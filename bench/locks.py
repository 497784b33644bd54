"""Orderly-consumer lock handoff and lock request rate; prints one JSON report, asserts nothing.

Handoff (issue 8), per client line, with the real Java client (tests/interop/orderly.py): two
orderly consumers in separate JVMs and a producer at 50 msgs/s on an 8-queue topic; consumer A
leaves and the time until the survivor consumes from each of A's queues is measured, per queue:

- ``handoff_ms``: how long the first message the survivor consumed from the queue waited past the
  later of the departure and its own send (what the handoff added to a message's latency);
- ``first_consume_ms``: departure until that consume (adds the wait for the producer's next
  message for the queue when none was left over: one comes every 160 ms);
- ``takeover_ms``: departure until the survivor's first pull of the queue reached the server
  (from the server's pull log).

Departures: clean stops and kill -9 in ``safe`` mode (the default), kill -9 in ``immediate`` mode.
A run's first departure only warms the JVMs up and is reported apart. Safe-mode kills wait
(i + 0.5) * 20 / n s after the group settled (shuffled) so they fall at spread phases of the
victim's 20 s lock-renewal cycle, which decides the release (last renewal + 31 s).
Targets: clean <= 100 ms (the reference broker 35-77 ms); kill -9 safe <= 31 s worst case,
<= 21 s on average (reference 60 s); kill -9 immediate <= 1 s.

Lock requests/s: LOCK_BATCH_MQ frames (8 queues each, JSON like the Java client) pipelined over
several connections to ``rmqproxy serve``: every client renewing its own queues (granted), and two
clients contending for the same 8 queues (one granted, one refused), each run ``--repeat`` times
(median and best); plus ``LockManager.lock`` calls/s in process. The load generator shares the
machine with the server, so on few cores it caps the rate too.

Run: ``python bench/locks.py [--lines 4.9,5] [--clean N] [--kill-safe N] [--kill-immediate N]
[--lock-requests N] [--repeat N]``; ``--lock-only`` skips the Java part. The defaults take about
10 minutes (each safe-mode kill waits up to 31 s).
"""

from __future__ import annotations

import argparse
import json
import random
import selectors
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine import machine  # noqa: E402
from twisted.internet import task  # noqa: E402

from codec.bodies import LockBatchRequestBody, LockBatchResponseBody, MessageQueue  # noqa: E402
from codec.codes import RequestCode, ResponseCode  # noqa: E402
from codec.command import RemotingCommand  # noqa: E402
from codec.peer import ANSWER, RemotingPeer  # noqa: E402
from rmqproxy.broker.locktable import LockManager  # noqa: E402
from tests.interop.orderly import Handoff, compile_programs, run_handoffs  # noqa: E402
from tests.interop.server import RunningServer  # noqa: E402
from tests.interop.wire import WireClient  # noqa: E402

TARGETS_MS = {"clean": 100, "kill_immediate": 1000, "kill_safe_max": 31_000, "kill_safe_mean": 21_000}


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def summarize(handoffs: list[Handoff]) -> dict:
    out: dict = {"events": len({h.event for h in handoffs}), "queues": len(handoffs)}
    for name in ("handoff_ms", "first_consume_ms", "takeover_ms"):
        values = [getattr(h, name) for h in handoffs if getattr(h, name) is not None]
        if values:
            out[f"{name}_p50"] = round(statistics.median(values), 1)
            out[f"{name}_mean"] = round(statistics.fmean(values), 1)
            out[f"{name}_max"] = round(max(values), 1)
    codes = sorted({h.first_pull_code for h in handoffs if h.first_pull_code not in (None, "SUCCESS")})
    if codes:
        out["first_pull_codes_other_than_success"] = codes
    return out


def handoff_line(line: str, args: argparse.Namespace, workdir: Path) -> dict:
    classpath = compile_programs(line, workdir / "classes")
    tag = line.replace(".", "")
    rng = random.Random(args.seed)
    result: dict = {}

    safe_waits = [(i + 0.5) * 20.0 / args.kill_safe for i in range(args.kill_safe)]
    rng.shuffle(safe_waits)
    departures = [("clean", 0.0)] * (1 + args.clean) + [("kill", w) for w in safe_waits]
    with RunningServer(workdir=workdir / "safe" / "server", broker_conf={"lockReleaseOnDisconnect": "safe"}) as server:
        safe = run_handoffs(classpath, server.namesrv, workdir / "safe", mode="safe", departures=departures,
                            topic=f"LockBenchS{tag}", pull_log_dir=server.store_dir / "logs", timeout=90.0)  # fmt: skip
    result["warmup_clean"] = summarize([h for h in safe if h.event == 0])
    result["clean"] = summarize([h for h in safe if h.kind == "clean" and h.event > 0])
    result["kill_safe"] = summarize([h for h in safe if h.kind == "kill"])
    result["kill_safe"]["waits_s"] = [round(w, 1) for w in safe_waits]

    departures = [("clean", 0.0)] + [("kill", 0.5)] * args.kill_immediate
    with RunningServer(workdir=workdir / "immediate" / "server",
                       broker_conf={"lockReleaseOnDisconnect": "immediate"}) as server:  # fmt: skip
        immediate = run_handoffs(classpath, server.namesrv, workdir / "immediate", mode="immediate",
                                 departures=departures, topic=f"LockBenchI{tag}",
                                 pull_log_dir=server.store_dir / "logs")  # fmt: skip
    result["kill_immediate"] = summarize([h for h in immediate if h.kind == "kill"])
    result["per_queue"] = [h.row() for h in safe + immediate]
    return result


# --- lock request rate ------------------------------------------------------------------------


def lock_request(group: str, client_id: str, topic: str) -> RemotingCommand:
    body = LockBatchRequestBody(
        consumer_group=group, client_id=client_id,
        mq_set=[MessageQueue(topic=topic, broker_name="rmqproxy-a", queue_id=q) for q in range(8)],
    ).to_json()  # fmt: skip
    return RemotingCommand(code=RequestCode.LOCK_BATCH_MQ, body=body)


def pipelined(
    addr: tuple[str, int], requests: list[RemotingCommand], total: int, window: int
) -> tuple[float, list[int]]:
    """Send ``total`` requests spread over one connection per request, ``window`` in flight on
    each, every answer matched to its request by opaque; return (seconds, locked queue count in
    the last answer on each connection)."""
    sel = selectors.DefaultSelector()
    conns = []
    per_conn = total // len(requests)
    for i, request in enumerate(requests):
        s = socket.create_connection(addr)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        state = {"request": request, "sent": 0, "done": 0, "peer": RemotingPeer(), "out": b"", "last": None, "i": i}
        conns.append((s, state))
        sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE, (s, state))
    start = time.perf_counter()
    remaining = len(conns)
    while remaining:
        for key, mask in sel.select(timeout=30):
            s, st = key.data
            if mask & selectors.EVENT_WRITE:
                burst = min(window - (st["sent"] - st["done"]), per_conn - st["sent"])
                if burst > 0:
                    st["out"] += b"".join(st["peer"].request(st["request"])[1] for _ in range(burst))
                    st["sent"] += burst
                if st["out"]:
                    n = s.send(st["out"])
                    st["out"] = st["out"][n:]
            if mask & selectors.EVENT_READ:
                data = s.recv(1 << 20)
                if not data:
                    raise RuntimeError("server closed the connection")
                answers = [i.command for i in st["peer"].receive(data) if i.kind is ANSWER]
                if answers:
                    st["done"] += len(answers)
                    st["last"] = answers[-1]
                if st["done"] == per_conn:
                    sel.unregister(s)
                    remaining -= 1
                    continue
            events = selectors.EVENT_READ
            if st["out"] or st["sent"] < per_conn:
                events |= selectors.EVENT_WRITE
            sel.modify(s, events, (s, st))
    seconds = time.perf_counter() - start
    held = []
    for s, st in conns:
        answer = st["last"]
        if answer.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"lock answered {answer.code}: {answer.remark}")
        held.append(len(LockBatchResponseBody.from_json(answer.body).lock_ok_mq_set))
        s.close()
    return seconds, held


def lock_rate(total: int, connections: int, window: int, repeat: int) -> dict:
    out: dict = {"requests": total, "connections": connections, "window": window, "queues_per_request": 8,
                 "repeat": repeat}  # fmt: skip
    with RunningServer() as server:
        addr = ("127.0.0.1", server.port)
        with WireClient(server.namesrv) as wire:  # locks are granted on existing queues only
            for topic in [f"T{i}" for i in range(connections)] + ["TX"]:
                assert wire.create_topic(topic, 8).code == ResponseCode.SUCCESS
        renew = [lock_request(f"g{i}", f"c{i}", f"T{i}") for i in range(connections)]
        contended = [lock_request("gx", f"c{i % 2}", "TX") for i in range(connections)]
        pipelined(addr, renew, min(total, 20_000), window)  # warm-up
        for name, requests, expected in (
            ("renew", renew, [8] * connections),
            ("contended", contended, [0] * (connections // 2) + [8] * (connections - connections // 2)),
        ):
            rates = []
            for _ in range(repeat):
                seconds, held = pipelined(addr, requests, total, window)
                assert sorted(held) == expected, held
                rates.append(total / seconds)
            out[f"{name}_requests_per_s_median"] = round(statistics.median(rates))
            out[f"{name}_requests_per_s_best"] = round(max(rates))

    manager = LockManager(task.Clock())
    mqs = [MessageQueue(topic="T", broker_name="rmqproxy-a", queue_id=q) for q in range(8)]
    n = 200_000
    start = time.perf_counter()
    for i in range(n):
        manager.lock("g", "c0" if i % 2 else "c1", mqs, conn=i % 2)
    out["in_process_lock_calls_per_s"] = round(n / (time.perf_counter() - start))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", default="4.9,5", help="client lines for the handoff part")
    parser.add_argument("--clean", type=int, default=5, help="measured clean stops (after one warm-up)")
    parser.add_argument("--kill-safe", type=int, default=5, help="kill -9 in safe mode (each takes up to 31 s)")
    parser.add_argument("--kill-immediate", type=int, default=5, help="kill -9 in immediate mode")
    parser.add_argument("--lock-requests", type=int, default=100_000)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--window", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each lock-rate scenario")
    parser.add_argument("--seed", type=int, default=8)
    parser.add_argument("--lock-only", action="store_true", help="skip the Java handoff measurements")
    args = parser.parse_args(argv)
    results: dict = {"targets_ms": TARGETS_MS}
    results["lock_requests"] = lock_rate(args.lock_requests, args.connections, args.window, args.repeat)
    if not args.lock_only:
        results["handoff"] = {}
        with tempfile.TemporaryDirectory(prefix="lockbench-") as tmp:
            for line in args.lines.split(","):
                started = time.monotonic()
                results["handoff"][line] = handoff_line(line, args, Path(tmp) / line)
                results["handoff"][line]["seconds"] = round(time.monotonic() - started)
    print(json.dumps({"benchmark": "locks", "machine": machine(), "results": results}, indent=2))


if __name__ == "__main__":
    main()
