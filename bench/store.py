"""Store throughput and recovery; prints a JSON report (numbers and machine), asserts nothing.

Targets (issue 5), 1 KiB messages: ASYNC append >= 150,000 msgs/s, read >= 300,000 msgs/s,
recovery of a 1 GiB commit log after a crash <= 10 s. Also SYNC append with 1 and 64 writers.
Run: ``python bench/store.py [--messages N] [--recovery-gib G] [--dir D]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from codec.message import HostPort, Message  # noqa: E402
from machine import machine  # noqa: E402
from rmqproxy.broker.store import FLUSH_ASYNC, FLUSH_SYNC, GetStatus, MessageStore, StoreConfig  # noqa: E402

BODY = os.urandom(1024)
QUEUES = 8


def pool(n: int = 64) -> list[Message]:
    """Messages shaped like a Java producer's (tag, key, unique id), reused round robin."""
    return [
        Message("BenchTopic", BODY, {"TAGS": "TagA", "KEYS": f"key-{i}", "UNIQ_KEY": f"7F0000013039{i:020X}"},
                queue_id=i % QUEUES, born_host=HostPort("10.0.0.7", 50123), born_timestamp=1_700_000_000_000)
        for i in range(n)
    ]  # fmt: skip


def open_store(root: Path, flush: str, segment: int = 1 << 30) -> MessageStore:
    store = MessageStore(root, StoreConfig(flush_disk_type=flush, mapped_file_size_commit_log=segment))
    store.start()
    return store


def bench_async(root: Path, n: int, batch: int) -> dict:
    store = open_store(root, FLUSH_ASYNC)
    msgs = pool()
    start = time.perf_counter()
    if batch == 1:
        for i in range(n):
            store.put(msgs[i & 63])
            if not i & 1023:
                store.completions.run_pending()
    else:
        groups = [[Message(m.topic, m.body, dict(m.properties), queue_id=0) for m in msgs[:batch]]]
        for i in range(n // batch):
            store.put_batch(groups[0])
            if not i & 63:
                store.completions.run_pending()
    elapsed = time.perf_counter() - start
    size = store.max_physical_offset
    store.shutdown()
    return {"msgs_per_s": round(n / elapsed), "mb_per_s": round(size / elapsed / 1e6, 1), "messages": n}


def bench_sync(root: Path, n: int, writers: int) -> dict:
    store = open_store(root, FLUSH_SYNC)
    msgs = pool()
    done = [0]
    latencies: list[float] = []

    def finished(started: float):
        def callback(result) -> None:
            done[0] += 1
            latencies.append(time.perf_counter() - started)

        return callback

    start = time.perf_counter()
    issued = 0
    while done[0] < n:
        while issued - done[0] < writers and issued < n:
            store.put(msgs[issued & 63]).add_done_callback(finished(time.perf_counter()))
            issued += 1
        store.completions.run_pending(timeout=1)
    elapsed = time.perf_counter() - start
    store.shutdown()
    latencies.sort()
    return {
        "msgs_per_s": round(n / elapsed),
        "mb_per_s": round(n * 1.2e-3 / elapsed, 1),
        "messages": n,
        "ack_latency_ms_p50": round(latencies[len(latencies) // 2] * 1000, 2),
        "ack_latency_ms_p99": round(latencies[int(len(latencies) * 0.99)] * 1000, 2),
    }


def bench_read(root: Path, n: int) -> dict:
    store = open_store(root, FLUSH_ASYNC)
    msgs = pool()
    for i in range(n):
        store.put(msgs[i & 63])
    start = time.perf_counter()
    read = 0
    for queue_id in range(QUEUES):
        offset = 0
        while True:
            r = store.get_message("bench", "BenchTopic", queue_id, offset, 32)
            if r.status != GetStatus.FOUND:
                break
            body = r.body  # what a pull answer sends
            read += len(r.messages)
            offset = r.next_begin_offset
    elapsed = time.perf_counter() - start
    store.shutdown()
    assert read == n and body
    return {"msgs_per_s": round(read / elapsed), "messages": read, "batch": 32}


def write_then_die(root: str, gib: float) -> None:
    """Child: fill about ``gib`` GiB of commit log, then SIGKILL itself (no clean stop)."""
    store = open_store(Path(root), FLUSH_ASYNC)
    msgs = pool()
    target = int(gib * (1 << 30))
    i = 0
    while store.max_physical_offset < target:
        store.put(msgs[i & 63])
        i += 1
        if not i & 4095:
            store.completions.run_pending()
    print(i, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


def bench_recovery(root: Path, gib: float) -> dict:
    child = subprocess.run(
        [sys.executable, __file__, "--write-then-die", str(root), "--recovery-gib", str(gib)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert child.returncode == -signal.SIGKILL, child.stderr
    messages = int(child.stdout.split()[0])
    out = {"commit_log_gib": gib, "messages": messages}
    # 1. As after a real crash: recovery resumes from the last checkpoint.
    start = time.perf_counter()
    store = MessageStore(root, StoreConfig(mapped_file_size_commit_log=1 << 30))
    store.start()
    out["from_checkpoint_s"] = round(time.perf_counter() - start, 3)
    out["from_checkpoint_records_rescanned"] = store.recovered_records
    checks = [store.max_offset("BenchTopic", q) for q in range(QUEUES)]
    store.flusher.stop()  # leave it as crashed again: no clean stop marker
    store.commitlog.close()
    # 2. Worst case: the checkpoint is lost, every record of the log is validated and re-indexed.
    (root / "checkpoint").unlink()
    start = time.perf_counter()
    store = MessageStore(root, StoreConfig(mapped_file_size_commit_log=1 << 30))
    store.start()
    out["full_scan_s"] = round(time.perf_counter() - start, 3)
    out["full_scan_records"] = store.recovered_records
    assert [store.max_offset("BenchTopic", q) for q in range(QUEUES)] == checks
    assert sum(checks) == messages
    store.shutdown()
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--sync-messages", type=int, default=20_000)
    parser.add_argument("--recovery-gib", type=float, default=1.0)
    parser.add_argument("--dir", default=None, help="where to put the stores (default: a temp dir)")
    parser.add_argument("--write-then-die", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.write_then_die:
        write_then_die(args.write_then_die, args.recovery_gib)
        return

    base = Path(tempfile.mkdtemp(prefix="rmqproxy-bench-", dir=args.dir))
    results: dict = {}
    try:
        for name, run in (
            ("async_append", lambda d: bench_async(d, args.messages, 1)),
            ("async_append_batch32", lambda d: bench_async(d, args.messages, 32)),
            ("sync_append_1_writer", lambda d: bench_sync(d, args.sync_messages // 4, 1)),
            ("sync_append_64_writers", lambda d: bench_sync(d, args.sync_messages, 64)),
            ("read_by_queue", lambda d: bench_read(d, args.messages)),
            ("recovery_after_crash", lambda d: bench_recovery(d, args.recovery_gib)),
        ):
            directory = base / name
            results[name] = run(directory)
            shutil.rmtree(directory, ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    report = {
        "benchmark": "store",
        "machine": machine(),
        "message_bytes": len(BODY),
        "results": results,
        "targets": {"async_append_msgs_per_s": 150_000, "read_msgs_per_s": 300_000, "recovery_1gib_s": 10},
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
