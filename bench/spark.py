"""The report's speed on generated event logs, JSON lines against compacted; prints (and
writes) a JSON report, asserts nothing.

For each size (default 1M and 10M events): generate the logs once with ``spark_jobs.generate``
(seed 7, hourly ``pulls-*.jsonl`` files, kept under ``bench/out/spark/`` for later runs) and a
compacted copy with rollups (``rmqproxy.observe.compaction``, as the server's background step
leaves a log; its time is reported, and it is made again when rollups change). Then time ``rmqproxy report --master local[2]`` end to end in a fresh
process, from process start to report written (JVM start, read, every table, Parquet, CSV,
report.html), over the JSON lines, over the compacted copy (rollups merged in the process: the command's
default there) and over the compacted copy through Spark (``--engine spark``), ``--runs`` times
each, interleaved, each kind first in turn; the median run of each is reported with its phase
times. The driver JVM maps this machine's class data sharing archive (spark_jobs.cds), recorded
first by an untimed run on 20k events if missing. ``job_s`` is the job's own time after the
session is up (for a merge, from the command's start). Also reported: events/s, the growth of time per event from the smallest to the
largest size (target: no worse than linear, i.e. <= 1.0 plus noise), the 10M target (<= 20 s
over compacted files), and the load average before and after each run, since a busy machine
slows every figure.

Run: ``python bench/spark.py [--sizes 1000000,10000000] [--runs 2] [--out bench/out/spark.json]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from machine import commit, machine

from rmqproxy.observe.compaction import compact
from spark_jobs.defaults import ROLLUP_VERSION
from spark_jobs import cds, files, generate

#: 10M events over compacted files, process start to report written (issue 38; 60 s over JSON before).
TARGET_10M_S = 20.0
#: What each timed run reads, and with which ``--engine``: the JSON lines, and the compacted copy as
#: ``rmqproxy report`` reads it by default (its rollups merged in the process, no JVM) and through
#: Spark (``--engine spark``, as on a cluster).
KINDS = {"json": ("json", "auto"), "compacted": ("compacted", "merge"), "compacted_spark": ("compacted", "spark")}


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def ensure_events(n: int, seed: int, base: Path) -> tuple[Path, float | None]:
    """The directory of ``n`` generated events (made now if missing; then its generation time)."""
    directory = base / f"events-{n}-seed{seed}"
    done = directory / "_COMPLETE"
    if done.exists():
        return directory, None
    if directory.exists():
        for p in directory.iterdir():
            p.unlink()
    started = time.monotonic()
    generate.write(directory, n, seed=seed)
    seconds = time.monotonic() - started
    done.write_text(json.dumps({"events": n, "seed": seed, "seconds": seconds}))
    return directory, seconds


def ensure_compacted(events_dir: Path) -> tuple[Path, float | None]:
    """A compacted copy of ``events_dir`` (made now if missing; then the compaction's time)."""
    directory = events_dir.with_name(events_dir.name + "-compacted")
    done = directory / "_COMPLETE"
    if done.exists() and json.loads(done.read_text()).get("rollup_version") == ROLLUP_VERSION:
        return directory, None
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    for path in events_dir.glob("pulls-*.jsonl"):
        shutil.copy2(path, directory / path.name)
    started = time.monotonic()
    written = compact(directory, now=time.time() + 86_400)  # every hour closed, however fresh the copy
    seconds = time.monotonic() - started
    done.write_text(json.dumps({"parquet_files": len(written), "seconds": seconds, "rollup_version": ROLLUP_VERSION}))
    return directory, seconds


def _size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("pulls-*") if p.is_file())


def prime_cds(base: Path, master: str) -> str | None:
    """This machine's driver class data sharing archive (spark_jobs.cds), recorded now if there is
    none, untimed, by the job itself on a small log: every run after the first maps it, so timing
    the recording run would count a one-off (~14 s more) as the job's cost."""
    if cds.existing() is None:
        events_dir, _ = ensure_events(20_000, 7, base)
        run_job(events_dir, base / "report-prime", master)
    found = cds.existing()
    return None if found is None else str(found)


def run_job(events_dir: Path, out_dir: Path, master: str, engine: str) -> dict:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    command = Path(sys.executable).with_name("rmqproxy")  # the console script, as a user runs it
    cmd = [str(command), "report", "--master", master, "--input", str(events_dir), "--output", str(out_dir),
           "--engine", engine]  # fmt: skip
    if engine != "merge":  # Spark settings: a merge refuses them, as it runs no Spark
        cmd += ["--conf", "spark.ui.showConsoleProgress=false"]
    load_before = _load()
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=out_dir.parent, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise RuntimeError(f"hold_report failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    summary = json.loads((out_dir / "summary.json").read_text())
    return {"wall_s": round(wall, 2), "engine": summary["engine"], "job_s": summary["seconds"],
            "phases_s": _phases(proc.stdout + proc.stderr), "events": summary["events"], "rejected": summary["rejected"], "load_before": load_before,
            "load_after": _load()}  # fmt: skip


def _phases(log: str) -> dict[str, int]:
    """Seconds between the job's progress lines ("[hold_report HH:MM:SS] writing report.html"),
    the tables as one phase (they are computed together; a line per table done is no phase end)."""
    marks = []
    for line in log.splitlines():
        match = re.match(r"\[hold_report (\d\d):(\d\d):(\d\d)\] ([^:]+?)(?::| in |$)", line)
        if match and not match[4].startswith(files.TABLE_DONE + " "):
            h, m, s, what = match.groups()
            marks.append((int(h) * 3600 + int(m) * 60 + int(s), what))
    return {what: (end - start) % 86400 for (start, what), (end, _) in itertools.pairwise(marks)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000000,10000000", help="comma-separated event counts")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--runs", type=int, default=2, help="runs of each kind per size, interleaved")
    parser.add_argument("--data", type=Path, default=ROOT / "bench" / "out" / "spark", help="generated logs")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "spark.json")
    args = parser.parse_args(argv)
    import pyspark

    archive = prime_cds(args.data, args.master)
    results = []
    for n in (int(x) for x in args.sizes.split(",")):
        events_dir, generated_s = ensure_events(n, args.seed, args.data)
        compacted_dir, compacted_s = ensure_compacted(events_dir)
        inputs = {"json": events_dir, "compacted": compacted_dir}
        runs: dict[str, list[dict]] = {kind: [] for kind in KINDS}
        for i in range(args.runs):
            for kind in [*KINDS][i % len(KINDS):] + [*KINDS][: i % len(KINDS)]:  # each kind first in turn
                read, engine = KINDS[kind]
                runs[kind].append(run_job(inputs[read], args.data / f"report-{n}-{kind}", args.master, engine))
                print(json.dumps({"events": n, "kind": kind, **runs[kind][-1]}), file=sys.stderr)
        result = {"events": n, "generation_s": None if generated_s is None else round(generated_s, 1),
                  "compaction_s": None if compacted_s is None else round(compacted_s, 1)}  # fmt: skip
        for kind in KINDS:
            walls = [r["wall_s"] for r in runs[kind]]
            median = sorted(runs[kind], key=lambda r: r["wall_s"])[(len(walls) - 1) // 2]
            read = inputs[KINDS[kind][0]]
            result[kind] = {
                "input_bytes": _size(read), "files": len(list(read.rglob("pulls-*"))),
                "wall_s_runs": walls, "wall_s": round(statistics.median(walls), 2), "median_run": median,
                "events_per_s": round(n / statistics.median(walls)),
            }  # fmt: skip
        results.append(result)
    first, last = results[0], results[-1]
    growth = ((last["compacted"]["wall_s"] / last["events"]) / (first["compacted"]["wall_s"] / first["events"])
              if len(results) > 1 else None)  # fmt: skip
    ten_million = next((r for r in results if r["events"] == 10_000_000), None)
    report = {
        "bench": "spark hold_report, JSON lines vs compacted",
        "commit": commit(),
        "machine": machine(),
        "pyspark": pyspark.__version__,
        "master": args.master,
        "cds_archive": archive,
        "runs": args.runs,
        "results": results,
        "time_per_event_growth": None if growth is None else round(growth, 3),
        "target_10m_s": TARGET_10M_S,
        "meets_10m_target": None if ten_million is None else ten_million["compacted"]["wall_s"] <= TARGET_10M_S,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
