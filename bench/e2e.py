"""End to end with the real Java client; prints a JSON report (numbers and machine), asserts nothing.

Each run starts a fresh server on a fresh store and measures, with the real Java 4.9.x client:
1. warm-up: the send workload below, to another topic, for ``--warmup`` seconds (default 10), so
   the server (a JVM's JIT, Python's caches) and the client reach their steady state first;
2. sync sends of 1 KiB messages from 16 threads until ``--messages`` (default 500,000) are stored:
   msgs/s and latency p50/p99 while the backlog builds;
3. a push consumer draining that backlog from the first offset: msgs/s from the first message it
   receives (``msgs_per_s``), and from its start, rebalance included (``msgs_per_s_from_start``);
with the server's CPU seconds and RSS for each phase. With metrics on (the default),
``/metrics`` is scraped every second, as Prometheus would; ``--no-metrics`` runs the server with
``metricsExporterType=DISABLE``.

``--reference`` compares with Apache RocketMQ 4.9.7 (name server and broker from Maven Central)
fairly: the same warm-up, the JVM flags of the reference's own start scripts (8 GiB broker heap,
G1, full JIT), 1 GiB commit-log files on both, and ``--pairs`` (default 2) interleaved pairs,
alternating which goes first; the report holds each pair and the median ratios. ``--doc``
rewrites docs/performance.md's end-to-end table from the report (``--doc-from`` from a saved
one). ``--pull-log-cost`` runs rmqproxy with the pull event log at its default (``all``) and
``off`` in interleaved pairs, for what the log costs; ``--compaction-cost`` with its background
compaction running on closed files (``closed_logs``) and not. ``--against-tree DIR`` runs this tree's
rmqproxy and the one checked out in DIR (another commit: a change's "before") in interleaved
pairs; ratios are this tree / DIR. Every report names the commit it measured. Run:
``python bench/e2e.py [--messages N] [--threads T] [--warmup S] [--line 4.9|5] [--no-metrics]
[--reference [--pairs N] [--doc]] | --pull-log-cost [--pairs N] | --compaction-cost [--pairs N] | --against-tree DIR [--pairs N]
| --doc-from REPORT.json]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import closed_logs  # noqa: E402
from machine import commit, machine  # noqa: E402

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


def run_java(classpath: str, *args: str, on_warm: Callable[[], None] | None = None, jvm: tuple[str, ...] = ()) -> dict:
    """Run one E2eBench phase (``jvm``: more JVM options, e.g. ``-Dtls.enable=true``); ``on_warm``
    is called when its warm-up ends (the "WARMED" line)."""
    with tempfile.TemporaryFile("w+") as errors:  # a file, not a pipe: nothing can block on it
        proc = subprocess.Popen(["java", "-Xms1g", "-Xmx2g", *jvm, "-cp", classpath, str(PROGRAM), *args],
                                stdout=subprocess.PIPE, stderr=errors, text=True)  # fmt: skip
        result = None
        for line in proc.stdout:
            if line.strip() == "WARMED" and on_warm is not None:
                on_warm()
            elif line.startswith("RESULT "):
                result = json.loads(line[len("RESULT "):])
        proc.wait(timeout=1800)
        if result is None:
            errors.seek(0)
            raise RuntimeError(f"E2eBench {args[0]} failed:\n{errors.read()[-3000:]}")
    return result


def measure(classpath: str, namesrv: str, pid: int, messages: int, threads: int, warmup_s: int,
            left: Callable[[], int] | None = None) -> dict:  # fmt: skip
    """Sync send after a warm-up in the same client JVM, then drain, against the server at
    ``namesrv`` whose serving process is ``pid``; server CPU is counted from the warm-up's end.
    ``left``: files still to compact, recorded after each phase."""
    phases: dict = {}
    start = {"cpu": proc_stats(pid)[:2], "time": time.perf_counter()}

    def warmed() -> None:
        start["cpu"], start["time"] = proc_stats(pid)[:2], time.perf_counter()

    for phase, args in (("send", (str(messages), str(threads), str(warmup_s))), ("drain", (str(messages), "1"))):
        phases[phase] = result = run_java(classpath, phase, namesrv, "E2eTopic", *args, on_warm=warmed)
        (user, kernel), started = start["cpu"], start["time"]
        user_after, kernel_after, rss = proc_stats(pid)
        cpu = user_after - user + kernel_after - kernel
        result["server_cpu_s"] = round(cpu, 2)
        result["server_kernel_cpu_s"] = round(kernel_after - kernel, 2)
        result["server_cpu_share"] = round(cpu / (time.perf_counter() - started), 2)
        result["server_peak_rss_mib"] = round(rss / 2**20, 1)
        result["server_rss_mib"] = round(current_rss(pid) / 2**20, 1)
        if left is not None:
            result["files_left_to_compact"] = left()
        start["cpu"], start["time"] = (user_after, kernel_after), time.perf_counter()
    return phases


def current_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def run_rmqproxy(classpath: str, args: argparse.Namespace, pull_log: str = "all", tree: Path | None = None,
                 compacting: bool | None = None) -> dict:  # fmt: skip
    """rmqproxy of this tree, or of the checkout ``tree`` (its server is started there, so
    ``python -m rmqproxy.cli`` imports that tree's code). With ``compacting`` set, its log folder
    starts with closed files to compact (``closed_logs``), and its background compaction is on
    (True) or off (False); the result says how many were left after each phase."""
    metrics_port = free_port()
    conf = {"metricsPromExporterPort": str(metrics_port), "metricsExporterType": "DISABLE" if args.no_metrics else "PROM",
            "mappedFileSizeCommitLog": str(1 << 30), "pullLogMode": pull_log}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="rmqproxy-e2e-") as name:
        workdir = Path(name)
        if compacting is not None:
            keys, seeded = closed_logs.prepare(workdir, compacting)
            conf.update(keys)
        with contextlib.chdir(tree or Path.cwd()):
            server = RunningServer(broker_conf=conf, message_delay_level=None, workdir=workdir)
        with server, Scraper(metrics_port, args.no_metrics):
            left = (lambda: closed_logs.left(closed_logs.log_folder(workdir))) if compacting is not None else None
            phases = measure(classpath, server.namesrv, server.pid, args.messages, args.threads, args.warmup, left)
        return phases if compacting is None else {"seeded": seeded, **phases}


def run_apache(classpath: str, args: argparse.Namespace) -> dict:
    """Apache RocketMQ as its own start scripts run it (``tests/interop/apache_broker.py``)."""
    from tests.interop.apache_broker import REFERENCE_VERSION, SCRIPT_JVM, ApacheBroker

    conf = {"mappedFileSizeCommitLog": str(1 << 30)}
    with ApacheBroker(message_delay_level=None, broker_conf=conf, jvm=SCRIPT_JVM) as broker:
        phases = measure(classpath, broker.namesrv, broker.broker_pid, args.messages, args.threads, args.warmup)
    return {"version": REFERENCE_VERSION, "jvm": "reference start scripts (8 GiB G1 broker)", **phases}


def compare(classpath: str, args: argparse.Namespace) -> dict:
    """rmqproxy against Apache, in pairs; ratios are rmqproxy / Apache."""
    pairs, medians = in_pairs(args, {"rmqproxy": lambda: run_rmqproxy(classpath, args),
                                     "apache": lambda: run_apache(classpath, args)})  # fmt: skip
    for pair in pairs:
        pair["rss_after_drain_ratio"] = round(
            pair["rmqproxy"]["drain"]["server_rss_mib"] / pair["apache"]["drain"]["server_rss_mib"], 3
        )
    return {"pairs": pairs, "median": medians}


def in_pairs(args: argparse.Namespace, runs: dict[str, Callable[[], dict]]) -> tuple[list[dict], dict]:
    """``args.pairs`` interleaved pairs of the two ``runs`` (named), alternating which goes first;
    each pair's send and drain ratio is the first run's msgs/s over the second's. The pairs and
    the median ratios."""
    (first, _), (second, _) = runs.items()
    pairs = []
    for i in range(args.pairs):
        order = (first, second) if i % 2 == 0 else (second, first)
        pair: dict = {"order": list(order)}
        for name in order:
            pair[name] = runs[name]()
        for phase in ("send", "drain"):
            pair[f"{phase}_ratio"] = round(pair[first][phase]["msgs_per_s"] / pair[second][phase]["msgs_per_s"], 3)
        pairs.append(pair)
    medians = {f"{phase}_ratio": round(statistics.median(p[f"{phase}_ratio"] for p in pairs), 3)
               for phase in ("send", "drain")}  # fmt: skip
    return pairs, medians


def compare_trees(classpath: str, args: argparse.Namespace) -> dict:
    """This tree's rmqproxy against the checkout ``args.against_tree``, in pairs; ratios are this
    tree / that one."""
    pairs, medians = in_pairs(args, {"this": lambda: run_rmqproxy(classpath, args),
                                     "that": lambda: run_rmqproxy(classpath, args, tree=args.against_tree)})  # fmt: skip
    return {"against": {"tree": str(args.against_tree), "commit": commit(args.against_tree)}, "tree_pairs": pairs,
            "tree_median": medians}


def compare_pull_log(classpath: str, args: argparse.Namespace) -> dict:
    """What the pull event log costs: rmqproxy with ``pullLogMode=all`` (the default) and ``off``,
    in pairs; ratios are on / off."""
    pairs, medians = in_pairs(args, {"all": lambda: run_rmqproxy(classpath, args, pull_log="all"),
                                     "off": lambda: run_rmqproxy(classpath, args, pull_log="off")})  # fmt: skip
    return {"pull_log_pairs": pairs, "pull_log_median": medians}


def compare_compaction(classpath: str, args: argparse.Namespace) -> dict:
    """What the background compaction costs: rmqproxy whose log folder starts with closed files,
    compacting them (``pullLogCompact=true``, the default) or not, in pairs; ratios are
    compacting / not. ``files_left_to_compact`` after each phase shows it was still running."""
    pairs, medians = in_pairs(args, {"compacting": lambda: run_rmqproxy(classpath, args, compacting=True),
                                     "idle": lambda: run_rmqproxy(classpath, args, compacting=False)})  # fmt: skip
    return {"compaction_pairs": pairs, "compaction_median": medians}


DOC = Path(__file__).resolve().parents[1] / "docs" / "performance.md"
DOC_BEGIN = "<!-- e2e table: written by bench/e2e.py --doc -->"
DOC_END = "<!-- end of e2e table -->"


def doc_table(report: dict) -> str:
    """docs/performance.md's end-to-end table, from a ``--reference`` report."""
    rows = []
    for phase, label in (("send", f"sync send, 16 threads, 1 KiB, building a {report['messages']:,} backlog"),
                         ("drain", "push consumer draining that backlog, from its first message")):  # fmt: skip
        ours = [p["rmqproxy"][phase]["msgs_per_s"] for p in report["pairs"]]
        theirs = [p["apache"][phase]["msgs_per_s"] for p in report["pairs"]]
        rows.append(f"| {label} | {' / '.join(f'{x:,}' for x in ours)} | {' / '.join(f'{x:,}' for x in theirs)} "
                    f"| {report['median'][f'{phase}_ratio']:.2f}x |")  # fmt: skip
    cpu = {name: statistics.median(p[name]["send"]["server_cpu_s"] / report["messages"] * 1e6 for p in report["pairs"])
           for name in ("rmqproxy", "apache")}  # fmt: skip
    rows.append(f"| server CPU per sent message (all threads) | {cpu['rmqproxy']:.0f} µs | {cpu['apache']:.0f} µs | |")
    rss = {name: [round(p[name]["drain"]["server_rss_mib"]) for p in report["pairs"]] for name in ("rmqproxy", "apache")}
    rows.append(f"| server RSS after the drain, MiB (Apache: its scripts' 8 GiB heap) | "
                f"{' / '.join(f'{x:,}' for x in rss['rmqproxy'])} | {' / '.join(f'{x:,}' for x in rss['apache'])} "
                f"| {statistics.median(p['rss_after_drain_ratio'] for p in report['pairs']):.2f}x |")  # fmt: skip
    behind = [f"{phase} ({report['median'][f'{phase}_ratio']:.2f}x)" for phase in ("send", "drain")
              if report["median"][f"{phase}_ratio"] < 1.0]  # fmt: skip
    m = report["machine"]
    return "\n".join([
        DOC_BEGIN,
        f"Measured {report['date']} at commit {report.get('commit', 'unknown')} with `python bench/e2e.py --reference "
        f"--pairs {len(report['pairs'])}`, on {m['cores']} cores ({m['cpu'] or 'unknown CPU'}), {m['memory_gib']} GiB, "
        f"Python {m['python']}; {len(report['pairs'])} interleaved pairs after a {report['warmup_s']} s warm-up each; "
        "msgs/s per pair, and the median of the per-pair ratios:",
        "",
        "| workload | rmqproxy | Apache RocketMQ 4.9.7 | rmqproxy / Apache |",
        "|---|---|---|---|",
        *rows,
        "",
        f"Still behind Apache: {', '.join(behind)}." if behind else "At or ahead of Apache on every workload.",
        DOC_END,
    ])


def write_doc(report: dict, doc: Path = DOC) -> None:
    """Replace the table between the markers of ``doc`` with ``report``'s."""
    text = doc.read_text()
    start, end = text.index(DOC_BEGIN), text.index(DOC_END) + len(DOC_END)
    doc.write_text(text[:start] + doc_table(report) + text[end:])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=500_000)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=10, help="seconds of full-load sends before measuring")
    parser.add_argument("--line", default="4.9")
    parser.add_argument("--no-metrics", action="store_true")
    parser.add_argument("--reference", action="store_true", help="compare with Apache RocketMQ 4.9.7, in pairs")
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--pull-log-cost", action="store_true", help="compare pullLogMode=all with off, in pairs")
    parser.add_argument("--compaction-cost", action="store_true",
                        help="compare with the log's background compaction running and not, in pairs")
    parser.add_argument("--against-tree", type=Path, help="compare with rmqproxy checked out in this folder, in pairs")
    parser.add_argument("--doc", action="store_true", help="rewrite docs/performance.md's e2e table (--reference)")
    parser.add_argument("--doc-from", type=Path, help="rewrite docs/performance.md's table from a saved --reference report")
    args = parser.parse_args(argv)
    if args.doc_from is not None:
        write_doc(json.loads(args.doc_from.read_text()))
        return
    classpath = build_classpath(args.line)
    report: dict = {
        "benchmark": "e2e", "date": time.strftime("%Y-%m-%d"), "commit": commit(), "machine": machine(),
        "client_line": args.line,
        "metrics_exporter": not args.no_metrics, "messages": args.messages, "threads": args.threads,
        "warmup_s": args.warmup,
    }  # fmt: skip
    if args.reference:
        report.update(compare(classpath, args))
    elif args.pull_log_cost:
        report.update(compare_pull_log(classpath, args))
    elif args.compaction_cost:
        report.update(compare_compaction(classpath, args))
    elif args.against_tree is not None:
        report.update(compare_trees(classpath, args))
    else:
        report.update(run_rmqproxy(classpath, args))
    print(json.dumps(report, indent=2), flush=True)
    if args.reference and args.doc:
        write_doc(report)


if __name__ == "__main__":
    main()
