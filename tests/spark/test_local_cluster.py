"""hold_report through spark-submit on ``local-cluster[2,1,1024]``: a standalone master and two
real executor JVMs (not threads in the driver), with the pip-installed pyspark as SPARK_HOME.
Its tables match the in-process local[2] run on the same input."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from spark_jobs import generate

REPO = Path(__file__).resolve().parents[2]


def test_spark_submit_on_a_local_cluster_matches_local_mode(spark, tmp_path) -> None:
    import pyspark

    from spark_jobs import hold_report

    logs = tmp_path / "logs"
    generate.write(logs, 1_500, seed=21)
    spark_home = Path(pyspark.__file__).resolve().parent
    env = {**os.environ, "SPARK_HOME": str(spark_home), "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable}  # fmt: skip
    cluster_out = tmp_path / "cluster"
    run = subprocess.run(
        [str(spark_home / "bin" / "spark-submit"), "--master", "local-cluster[2,1,1024]",
         "--conf", "spark.ui.enabled=false", "--conf", "spark.ui.showConsoleProgress=false",
         "--conf", f"spark.local.dir={tmp_path / 'scratch'}", "--conf", "spark.sql.shuffle.partitions=4",
         str(REPO / "spark_jobs" / "hold_report.py"), "--input", str(logs), "--output", str(cluster_out),
         "--min-pulls", "1"],
        cwd=tmp_path, env=env, check=False, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-4000:]
    assert "1500 events kept" in run.stdout + run.stderr  # spark-submit merges the driver's stderr into stdout
    local_out = tmp_path / "local"
    hold_report.run(spark, [str(logs)], str(local_out), min_pulls=1)
    for name in ("by_minute", "by_hour", "group_topic", "slowest_queues"):
        assert (cluster_out / "csv" / f"{name}.csv").read_text() == (local_out / "csv" / f"{name}.csv").read_text()
    assert not (tmp_path / "spark-warehouse").exists() and not (tmp_path / "metastore_db").exists()
