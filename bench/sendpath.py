"""The send path in process: what a stored message costs the reactor thread, without sockets or
the client; prints a JSON report (numbers and machine), asserts nothing.

SEND_MESSAGE_V2 frames as the Java 4.9 client writes them (JSON header, KEYS, TAGS, WAIT and
UNIQ_KEY properties, 1 KiB body, 4 queues of an auto-created topic) go into a whole server on the
test harness (``tests/server/harness.py``: real store in a temporary directory, metrics on) in
reads of 8 frames, the pipelining the Java client shows under 16 sending threads. The first tenth
warms up; the rest is timed in CPU seconds of this process. ``--profile`` adds cProfile's top
functions by own time (cProfile slows every call about fourfold, so read it for shares, not
microseconds). ``--implementation`` picks the codec (``codec.implementation``): ``both`` alternates
pure and compiled runs (``--runs`` of each, interleaved so drift hits both alike) and reports every
run and the median of each. Run: ``python bench/sendpath.py [--messages N] [--profile]
[--implementation pure|compiled|both] [--runs N]``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine import commit, machine  # noqa: E402

from send_frames import frames  # noqa: E402

from codec import implementation  # noqa: E402
from tests.server.harness import Client, make_server  # noqa: E402

FRAMES_PER_READ = 8


def measure(messages: int, profile: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        server, _reactor = make_server(Path(tmp))
        client = Client(server)
        data = frames(messages)
        reads = [b"".join(data[i : i + FRAMES_PER_READ]) for i in range(0, len(data), FRAMES_PER_READ)]
        warm = len(reads) // 10
        for read in reads[:warm]:
            client.conn.dataReceived(read)
        client.transport.clear()
        profiler = cProfile.Profile() if profile else None
        began = time.process_time()
        if profiler is not None:
            profiler.enable()
        for k, read in enumerate(reads[warm:]):
            client.conn.dataReceived(read)
            if k % 64 == 0:
                client.transport.clear()
        if profiler is not None:
            profiler.disable()
        cpu_s = time.process_time() - began
        timed = messages - warm * FRAMES_PER_READ
        stored = server.store.put_count
        server.stop()
    report: dict = {"messages_timed": timed, "stored": stored, "cpu_us_per_message": round(cpu_s / timed * 1e6, 2)}
    if profiler is not None:
        stats = pstats.Stats(profiler, stream=io.StringIO())
        total = stats.total_tt  # type: ignore[attr-defined]
        rows = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:25]  # type: ignore[attr-defined]
        report["profile_own_time_share"] = [
            {"function": f"{Path(file).name}:{line}({name})", "calls": calls, "share": round(own / total, 3)}
            for (file, line, name), (_cc, calls, own, _cum, _callers) in rows
        ]
    return report


def compare(kinds: list[str], runs: int, messages: int, profile: bool) -> dict:
    """``runs`` measurements of each codec implementation in ``kinds``, interleaved (A B A B): each
    implementation's runs and the median of their cpu_us_per_message."""
    measured: dict[str, list[dict]] = {kind: [] for kind in kinds}
    for _ in range(runs):
        for kind in kinds:
            implementation.use(kind)
            measured[kind].append(measure(messages, profile))
    return {
        kind: {"cpu_us_per_message": statistics.median(r["cpu_us_per_message"] for r in reports),
               "runs_cpu_us_per_message": [r["cpu_us_per_message"] for r in reports], "runs": reports}
        for kind, reports in measured.items()
    }  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--implementation", choices=["pure", "compiled", "both"], default=implementation.DEFAULT)
    parser.add_argument("--runs", type=int, default=1, help="measurements of each implementation")
    args = parser.parse_args(argv)
    kinds = ["pure", "compiled"] if args.implementation == "both" else [args.implementation]
    results = compare(kinds, args.runs, args.messages, args.profile)
    print(json.dumps({"benchmark": "sendpath", "commit": commit(), "machine": machine(), "results": results}, indent=2))


if __name__ == "__main__":
    main()
