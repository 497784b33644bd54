"""End to end with the real Java client; prints a JSON report (numbers and machine), asserts nothing.

1. sync sends of 1 KiB messages from 16 threads (msgs/s, latency p50/p99);
2. a push consumer draining the backlog (default 1,000,000 messages) from the first offset;
with the server's CPU seconds and peak RSS for each phase. Reference on this machine, Apache
RocketMQ 4.9.7 (issue 6): sync send 22,300 msgs/s (p99 4.5 ms), drain 145,000 msgs/s. Targets:
send >= 20,000 msgs/s, drain >= 100,000 msgs/s. With metrics on, ``/metrics`` is scraped every
second, as Prometheus would; ``--no-metrics`` runs the server with ``metricsExporterType=DISABLE``
(no measuring, no exporter), to measure the overhead (issue 9: ratio >= 0.95).
``--reference`` also runs both workloads against a real Apache RocketMQ 4.9.7 (name server and
broker from Maven Central) right after, so the report holds a reference taken on the same machine
on the same day. Run: ``python bench/e2e.py [--messages N] [--threads T] [--line 4.9|5]
[--no-metrics] [--reference]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine import machine  # noqa: E402

from tests.interop.oracle import build_classpath  # noqa: E402
from tests.interop.server import RunningServer, free_port  # noqa: E402

PROGRAM = Path(__file__).resolve().parent / "java" / "E2eBench.java"


def proc_stats(pid: int) -> tuple[float, float, int]:
    """(user CPU seconds, kernel CPU seconds, peak RSS bytes) of a process, from /proc: the split
    tells Python's own cost from the sockets' (a read carries several pipelined sends)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = 100
    user, kernel = int(fields[11]) / ticks, int(fields[12]) / ticks
    peak = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            peak = int(line.split()[1]) * 1024
    return user, kernel, peak


class Scraper:
    """GET /metrics every second in a thread while the benchmark runs (unless ``off``)."""

    def __init__(self, port: int, off: bool) -> None:
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.off = off
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(1.0):
            with urllib.request.urlopen(self.url, timeout=5) as response:
                response.read()

    def __enter__(self) -> Scraper:
        if not self.off:
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join()


def run_java(classpath: str, *args: str) -> dict:
    out = subprocess.run(["java", "-Xms1g", "-Xmx2g", "-cp", classpath, str(PROGRAM), *args],
                         capture_output=True, text=True, timeout=1800)  # fmt: skip
    lines = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")]
    if not lines:
        raise RuntimeError(f"E2eBench {args[0]} failed:\n{out.stderr[-3000:]}")
    return json.loads(lines[0][len("RESULT "):])


def measure(classpath: str, namesrv: str, pid: int, messages: int, threads: int) -> dict:
    """Sync send, then drain, against the server at ``namesrv`` whose serving process is ``pid``."""
    phases: dict = {}
    user, kernel, _ = proc_stats(pid)
    for phase, args in (("send", (str(messages), str(threads))), ("drain", (str(messages), "1"))):
        started = time.perf_counter()
        phases[phase] = result = run_java(classpath, phase, namesrv, "E2eTopic", *args)
        user_after, kernel_after, rss = proc_stats(pid)
        cpu = user_after - user + kernel_after - kernel
        result["server_cpu_s"] = round(cpu, 2)
        result["server_kernel_cpu_s"] = round(kernel_after - kernel, 2)
        result["server_cpu_share"] = round(cpu / (time.perf_counter() - started), 2)
        result["server_peak_rss_mib"] = round(rss / 2**20, 1)
        user, kernel = user_after, kernel_after
    return phases


def measure_reference(classpath: str, messages: int, threads: int) -> dict:
    """The same workloads against Apache RocketMQ (tests/interop/apache_broker.py), now, on this
    machine: the issue's reference figures were taken on another day, and this VM varies."""
    from tests.interop.apache_broker import REFERENCE_VERSION, ApacheBroker

    with ApacheBroker(message_delay_level=None) as broker:
        phases = measure(classpath, broker.namesrv, broker.broker_pid, messages, threads)
    return {"version": REFERENCE_VERSION, **phases}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--line", default="4.9")
    parser.add_argument("--no-metrics", action="store_true")
    parser.add_argument("--reference", action="store_true", help="also run both workloads on Apache RocketMQ 4.9.7")
    args = parser.parse_args(argv)
    classpath = build_classpath(args.line)
    metrics_port = free_port()
    conf = {"metricsPromExporterPort": str(metrics_port), "metricsExporterType": "DISABLE" if args.no_metrics else "PROM",
            "mappedFileSizeCommitLog": str(1 << 30)}  # fmt: skip
    report: dict = {
        "benchmark": "e2e", "machine": machine(), "client_line": args.line, "metrics_exporter": not args.no_metrics,
        "messages": args.messages, "threads": args.threads,
    }  # fmt: skip
    with RunningServer(broker_conf=conf, message_delay_level=None) as server, Scraper(metrics_port, args.no_metrics):
        report.update(measure(classpath, server.namesrv, server.pid, args.messages, args.threads))
    report["reference_apache_4_9_7"] = {"send_msgs_per_s": 22300, "send_p99_ms": 4.5, "drain_msgs_per_s": 145000}
    if args.reference:
        report["reference_measured_now"] = measure_reference(classpath, args.messages, args.threads)
    report["targets"] = {"send_msgs_per_s": 20000, "drain_msgs_per_s": 100000}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
