"""Class data sharing for the driver JVM a job starts itself (spark_jobs.cds): the first run records
an archive, the next maps it, and a damaged archive never stops a job."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spark_jobs import cds

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
from spark_jobs.session import build_session
spark = build_session("cds-probe", "local[1]", {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"})
assert spark.range(3).count() == 3
bean = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
print("ARGS " + json.dumps(list(bean.getInputArguments())))
"""


def _probe(cache: Path, cwd: Path) -> list[str]:
    """The driver JVM's arguments in a fresh Python process that builds a session with ``cache``."""
    env = {**os.environ, "SPARK_JOBS_CDS": "on", "SPARK_JOBS_CDS_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-c", PROBE], cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=300, check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    line = next(x for x in run.stdout.splitlines() if x.startswith("ARGS "))
    return json.loads(line[5:])


def _flag(args: list[str], name: str) -> str | None:
    return next((a.split("=", 1)[1] for a in args if a.startswith(f"-XX:{name}=")), None)


def test_first_run_records_the_next_maps_and_a_damaged_archive_is_dropped(tmp_path) -> None:
    if shutil.which("java") is None:
        pytest.skip("needs java")
    cache = tmp_path / "cds"
    recording = _flag(_probe(cache, tmp_path), "ArchiveClassesAtExit")
    assert recording is not None
    archives = list(cache.iterdir())
    assert [p.suffix for p in archives] == [".jsa"], archives  # no lock, recording or log left
    assert archives[0].stat().st_size > 1 << 20

    used = _probe(cache, tmp_path)
    assert _flag(used, "SharedArchiveFile") == str(archives[0])
    assert _flag(used, "ArchiveClassesAtExit") is None
    assert list(cache.iterdir()) == archives

    # cut short, as a full disk would leave it: the JVM cannot start with it, so the job starts without
    with open(archives[0], "r+b") as f:
        f.truncate(1 << 20)
    args = _probe(cache, tmp_path)
    assert _flag(args, "SharedArchiveFile") is None
    assert not archives[0].exists()


def test_off_gives_no_flags(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("SPARK_JOBS_CDS", "off")
    monkeypatch.setenv("SPARK_JOBS_CDS_DIR", str(tmp_path))
    assert cds.archive().flags == ""
    assert list(tmp_path.iterdir()) == []


def test_one_process_records_at_a_time_and_a_stale_lock_is_taken_over(monkeypatch, tmp_path) -> None:
    if cds._key() is None:
        pytest.skip("needs java")
    monkeypatch.setenv("SPARK_JOBS_CDS", "on")
    monkeypatch.setenv("SPARK_JOBS_CDS_DIR", str(tmp_path))
    first = cds.archive()
    assert "-XX:ArchiveClassesAtExit=" in first.flags
    (lock,) = tmp_path.glob("*.lock")
    assert cds.archive().flags == ""  # another process is recording
    assert lock.exists()

    old = time.time() - cds.STALE_LOCK_S - 60
    os.utime(lock, (old, old))
    taken = cds.archive()
    assert "-XX:ArchiveClassesAtExit=" in taken.flags
    assert lock.stat().st_mtime > old

    taken.started(None)  # no JVM to write a recording: nothing is kept
    assert list(tmp_path.iterdir()) == []
