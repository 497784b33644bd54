"""``rmqproxy report`` (spark_jobs.cli.report): options become the jobs' own arguments."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from spark_jobs import cli
from spark_jobs.defaults import DEFAULT_SKETCH_K

FIXTURE = Path(__file__).resolve().parent / "data" / "stats.log"


def test_report_passes_its_options_to_the_hold_report_job(monkeypatch) -> None:
    from spark_jobs import hold_report

    seen = []
    monkeypatch.setattr(hold_report, "main", seen.append)
    result = CliRunner().invoke(
        cli.report, ["-i", "a/*.jsonl", "-i", "hdfs:///b", "-o", "out", "--master", "local[2]",
                     "--short-polling-ms", "500", "--events-parquet", "--conf", "spark.executor.memory=2g",
                     "--engine", "spark"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert seen == [["--input", "a/*.jsonl", "--input", "hdfs:///b", "--output", "out", "--top", "20",
                     "--master", "local[2]", "--conf", "spark.executor.memory=2g", "--short-polling-ms", "500",
                     "--sketch-k", str(DEFAULT_SKETCH_K), "--engine", "spark", "--events-parquet"]]  # fmt: skip


HELP_WITHOUT_SPARK = (
    "import sys, spark_jobs.cli as c; c.report(['--help'], standalone_mode=False); sys.exit('pyspark' in sys.modules)"
)


def test_report_help_needs_no_spark() -> None:
    result = subprocess.run(
        [sys.executable, "-c", HELP_WITHOUT_SPARK],
        check=False, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "--source [events|stats-log]" in result.stdout


def test_report_runs_the_stats_log_job_in_its_own_process(tmp_path) -> None:
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-c", "import spark_jobs.cli as c; c.report()", "--source", "stats-log", "-i", str(FIXTURE),
         "-o", str(out), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
         "--conf", "spark.ui.showConsoleProgress=false", "--conf", "spark.sql.shuffle.partitions=2"],
        cwd=tmp_path, check=False, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    assert json.loads((out / "summary.json").read_text())["lines_used"] == 59
