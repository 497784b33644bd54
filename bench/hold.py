"""Hold-service cost at scale on the real Twisted reactor; prints a JSON report, asserts nothing.

Holds N pulls (default 100,000) over 1,000 queues with deadlines spread over 2 s, measures the
cost of holding, of waking a queue's pulls on arrival, of disconnects, and how late deadline
wakes fire (overshoot) while the reactor runs them all. Memory per held pull via tracemalloc.
Run: ``python bench/hold.py [--pulls N]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine import machine  # noqa: E402
from twisted.internet import reactor  # noqa: E402

from rmqproxy.hold import HeldPull, HoldService  # noqa: E402


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pulls", type=int, default=100_000)
    parser.add_argument("--queues", type=int, default=1000)
    args = parser.parse_args(argv)
    n, queues = args.pulls, args.queues
    service = HoldService(reactor, max_held=n)
    overshoot: list[float] = []
    results: dict = {"pulls": n, "queues": queues}

    def make(i: int, timeout: float, record: bool) -> HeldPull:
        def reread(wake: str, final: bool) -> bool:
            if record and wake == "timeout":
                overshoot.append(reactor.seconds() - pull.deadline)
            return True

        now = reactor.seconds()
        pull = HeldPull(("T", i % queues), 0, lambda code: True, f"conn{i % 5000}", reread, now, now + timeout)
        return pull

    # 0. memory per held pull (tracemalloc slows everything, so it is measured on its own)
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for i in range(n):
        service.hold(make(i, 60.0, False))
    after = tracemalloc.take_snapshot()
    results["bytes_per_held_pull"] = round(sum(s.size_diff for s in after.compare_to(before, "filename")) / n)
    tracemalloc.stop()
    service.shutdown()

    # 1. hold and wake by arrival
    start = time.perf_counter()
    for i in range(n):
        service.hold(make(i, 60.0, False))
    results["hold_per_s"] = round(n / (time.perf_counter() - start))
    start = time.perf_counter()
    for q in range(queues):
        service.arrived("T", q, 0, 0)
    results["arrival_wakes_per_s"] = round(n / (time.perf_counter() - start))
    assert service.count == 0

    # 2. hold and drop by disconnect
    for i in range(n):
        service.hold(make(i, 60.0, False))
    start = time.perf_counter()
    for c in range(5000):
        service.connection_closed(f"conn{c}")
    results["disconnect_drops_per_s"] = round(n / (time.perf_counter() - start))
    assert service.count == 0

    # 3. deadlines: n pulls expiring over 2 s while the reactor runs (set up first, then run)
    setup_margin = 10.0
    base = reactor.seconds() + setup_margin
    for i in range(n):
        service.hold(make(i, base + 2.0 * i / n - reactor.seconds(), True))
    cpu0 = time.process_time()
    reactor.callLater(base + 3.0 - reactor.seconds(), reactor.stop)
    reactor.run()
    assert service.count == 0 and len(overshoot) == n
    results["timeout_wakes"] = len(overshoot)
    results["timeout_overshoot_ms_p50"] = round(percentile(overshoot, 0.5) * 1000, 3)
    results["timeout_overshoot_ms_p99"] = round(percentile(overshoot, 0.99) * 1000, 3)
    results["timeout_overshoot_ms_max"] = round(max(overshoot) * 1000, 3)
    results["reactor_cpu_s_for_expiry_phase"] = round(time.process_time() - cpu0, 3)
    print(json.dumps({"benchmark": "hold", "machine": machine(), "results": results}, indent=2))


if __name__ == "__main__":
    main()
