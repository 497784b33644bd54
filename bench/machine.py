"""What machine a benchmark ran on, for the JSON reports."""

from __future__ import annotations

import os
import platform
import statistics
import time
from pathlib import Path


def machine() -> dict:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        memory_gib = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError):
        memory_gib = None
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": memory_gib,
        "speed_probe_ms": speed_probe(),
    }


def _workload() -> int:
    table = {f"key-{i}": i * 7 % 13 for i in range(100_000)}
    return sum(sorted(table.values())) + len("".join(sorted(table)[:1000]))


def speed_probe(rounds: int = 7) -> dict:
    """Milliseconds a fixed pure-Python workload takes right now (best and median of ``rounds``).
    This VM's speed moves by tens of percent from hour to hour, so a report's figures are read
    against this one: the same code on a slower hour has a larger probe time."""
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        _workload()
        times.append((time.perf_counter() - started) * 1000)
    return {"best": round(min(times), 1), "median": round(statistics.median(times), 1)}
