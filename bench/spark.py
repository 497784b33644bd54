"""hold_report throughput on generated event logs; prints (and writes) a JSON report, asserts nothing.

For each size (default 1M and 10M events): generate the logs once with ``spark_jobs.generate``
(seed 7, hourly ``pulls-*.jsonl`` files, kept under ``bench/out/spark/`` for later runs), then
time ``python -m spark_jobs.hold_report --master local[2]`` end to end in a fresh process: JVM
start, parse, every table, Parquet, CSV, report.html. The driver JVM maps this machine's class
data sharing archive (spark_jobs.cds), recorded first by an untimed run on 20k events if missing.
``job_s`` is the job's own time after the session is up. Also reported: events/s, the growth of
time per event from the smallest to the largest size (target: no worse than linear, i.e. <= 1.0
plus noise), the 10M target (<= 60 s), and the load average before and after each run, since a
busy machine slows every figure.

Run: ``python bench/spark.py [--sizes 1000000,10000000] [--out bench/out/spark.json]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from machine import machine

from spark_jobs import cds, files, generate

TARGET_10M_S = 60.0


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


def prime_cds(base: Path, master: str) -> str | None:
    """This machine's driver class data sharing archive (spark_jobs.cds), recorded now if there is
    none, untimed, by the job itself on a small log: every run after the first maps it, so timing
    the recording run would count a one-off (~14 s more) as the job's cost."""
    if cds.existing() is None:
        events_dir, _ = ensure_events(20_000, 7, base)
        run_job(events_dir, base / "report-prime", master)
    found = cds.existing()
    return None if found is None else str(found)


def run_job(events_dir: Path, out_dir: Path, master: str) -> dict:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    cmd = [sys.executable, "-m", "spark_jobs.hold_report", "--master", master, "--input", str(events_dir),
           "--output", str(out_dir), "--conf", "spark.ui.showConsoleProgress=false"]  # fmt: skip
    load_before = _load()
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=out_dir.parent, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise RuntimeError(f"hold_report failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    summary = json.loads((out_dir / "summary.json").read_text())
    return {"wall_s": round(wall, 2), "job_s": summary["seconds"], "phases_s": _phases(proc.stdout + proc.stderr),
            "events": summary["events"], "rejected": summary["rejected"], "load_before": load_before,
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
    parser.add_argument("--data", type=Path, default=ROOT / "bench" / "out" / "spark", help="generated logs")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "spark.json")
    args = parser.parse_args(argv)
    import pyspark

    archive = prime_cds(args.data, args.master)
    results = []
    for n in (int(x) for x in args.sizes.split(",")):
        events_dir, generated_s = ensure_events(n, args.seed, args.data)
        input_bytes = sum(p.stat().st_size for p in events_dir.glob("pulls-*"))
        run = run_job(events_dir, args.data / f"report-{n}", args.master)
        results.append({
            "events": n, "input_bytes": input_bytes, "files": len(list(events_dir.glob("pulls-*"))),
            "generation_s": None if generated_s is None else round(generated_s, 1), **run,
            "events_per_s": round(n / run["wall_s"]), "events_per_s_in_job": round(n / run["job_s"]),
        })  # fmt: skip
        print(json.dumps(results[-1]), file=sys.stderr)
    first, last = results[0], results[-1]
    growth = (last["wall_s"] / last["events"]) / (first["wall_s"] / first["events"]) if len(results) > 1 else None
    ten_million = next((r for r in results if r["events"] == 10_000_000), None)
    report = {
        "bench": "spark hold_report",
        "machine": machine(),
        "pyspark": pyspark.__version__,
        "master": args.master,
        "cds_archive": archive,
        "results": results,
        "time_per_event_growth": None if growth is None else round(growth, 3),
        "target_10m_s": TARGET_10M_S,
        "meets_10m_target": None if ten_million is None else ten_million["wall_s"] <= TARGET_10M_S,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
