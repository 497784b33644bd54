"""What machine a benchmark ran on, for the JSON reports."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import time
from pathlib import Path


def commit(tree: Path | None = None) -> str:
    """The commit a benchmark measured (``tree``: a checkout, default this one), with ``+changes``
    when its work tree differs from it."""
    where = tree or Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=where, capture_output=True, text=True,
                              check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=where,
                               capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head}+changes" if dirty else head


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
