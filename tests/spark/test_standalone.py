"""``rmqproxy report --master spark://...`` on a real Spark standalone cluster: a master and one
worker started from the installed pyspark's ``spark-class`` (its package directory is SPARK_HOME),
separate JVMs talking over RPC on 127.0.0.1, the worker launching the executor JVM. Over a
compacted event log (Parquet files, a sidecar of rejected lines, and the current hour's JSON
lines), its summary.json and tables are those of the same report in local[2].

Everything the cluster writes (work dir, executor logs, scratch space, daemon logs) goes under
the test's tmp dir; the master and worker are killed with their process groups (the executor is
a child of the worker) however the test ends."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

from rmqproxy.observe.compaction import compact_file, dataset_files
from spark_jobs import generate
from tests.needs import skip_or_fail

MIDNIGHT_MS = 1_715_644_800_000  # 2024-05-14 00:00:00 UTC
TORN = b'{"ts_ms":1715644800001,"arrived_ms"\n'
#: The worker's registration with the master, seconds (both JVMs start in a few).
STARTUP_S = 90


def _free_ports(n: int) -> list[int]:
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def _stop(proc: subprocess.Popen) -> None:
    """End ``proc`` and its process group (spark-class execs java; the worker's executor is its
    child): SIGTERM, and SIGKILL for whatever is left after a grace period."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(15)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(15)


def _tail(path: Path, n: int = 3000) -> str:
    return path.read_text(errors="replace")[-n:] if path.exists() else f"({path} missing)"


def _alive_workers(webui_port: int) -> list[dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{webui_port}/json/", timeout=2) as answer:
            state = json.load(answer)
    except (OSError, ValueError):  # not listening yet, or a half-started UI
        return []
    return [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]


@contextlib.contextmanager
def standalone_cluster(root: Path) -> Iterator[tuple[str, dict[str, str], Callable[[], None]]]:
    """Start a master and a worker (1 core, 1 GiB) under ``root``; yields (master URL, the
    environment a driver for it runs with, a function that returns once the worker is registered).
    ``SPARK_LOCAL_DIRS`` in that environment keeps the driver's scratch space under ``root`` too."""
    import pyspark

    spark_home = Path(pyspark.__file__).resolve().parent
    spark_class = spark_home / "bin" / "spark-class"
    conf_dir, work, local = root / "conf", root / "work", root / "local"
    for d in (conf_dir, work, local):
        d.mkdir(parents=True)
    env = {
        **os.environ, "SPARK_HOME": str(spark_home), "SPARK_CONF_DIR": str(conf_dir), "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_DIRS": str(local), "SPARK_WORKER_DIR": str(work),
        # the Python of any Python worker an executor starts (the jobs' executors start none today)
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_DAEMON_MEMORY": "512m", "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
    }  # fmt: skip
    port, master_ui, worker_ui = _free_ports(3)
    url = f"spark://127.0.0.1:{port}"
    commands = {
        "master": [str(spark_class), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                   "--port", str(port), "--webui-port", str(master_ui)],
        "worker": [str(spark_class), "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                   "--cores", "1", "--memory", "1g", "--webui-port", str(worker_ui), "--work-dir", str(work)],
    }  # fmt: skip
    procs: dict[str, subprocess.Popen] = {}

    def logs() -> str:
        return "\n".join(f"--- {name}.log\n{_tail(root / f'{name}.log')}" for name in commands)

    def registered() -> None:
        deadline = time.monotonic() + STARTUP_S
        while not _alive_workers(master_ui):
            for name, proc in procs.items():
                assert proc.poll() is None, f"the {name} exited with {proc.returncode}\n{logs()}"
            assert time.monotonic() < deadline, f"no worker registered in {STARTUP_S} s\n{logs()}"
            with contextlib.suppress(subprocess.TimeoutExpired):
                procs["worker"].wait(0.25)  # the poll's interval; ends early if the worker dies

    try:
        for name, command in commands.items():
            with (root / f"{name}.log").open("wb") as log:
                procs[name] = subprocess.Popen(command, env=env, cwd=root, stdin=subprocess.DEVNULL, stdout=log,
                                               stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        driver_env = {k: v for k, v in env.items() if k not in ("SPARK_MASTER_OPTS", "SPARK_DAEMON_MEMORY")}
        yield url, driver_env, registered
    finally:
        for proc in reversed(procs.values()):
            _stop(proc)


def _compacted_log(folder: Path) -> None:
    """Three hourly files of a server's log: the two closed ones compacted (the first with a torn
    line, which its compaction keeps aside), the current hour's still JSON lines."""
    paths = [path for hour in (3, 2, 1) for path in generate.write(
        folder, 1_000, seed=hour, start_ms=MIDNIGHT_MS - hour * 3_600_000)]  # fmt: skip
    assert len(paths) == 3
    with paths[0].open("ab") as f:
        f.write(TORN)
    compact_file(paths[0])
    compact_file(paths[1])
    json_files, parquet = dataset_files(folder)
    assert len(parquet) == 2 and len(json_files) == 2, (json_files, parquet)  # a sidecar and the current hour


def _outputs(out: Path) -> tuple[dict, dict[str, str]]:
    return json.loads((out / "summary.json").read_text()), {p.name: p.read_text() for p in (out / "csv").glob("*.csv")}


def test_report_on_a_standalone_cluster_matches_local_mode(spark, tmp_path) -> None:
    if shutil.which("bash") is None:
        skip_or_fail("the standalone cluster test needs bash (spark-class)")
    rmqproxy = Path(sysconfig.get_path("scripts")) / "rmqproxy"
    assert rmqproxy.exists(), f"{rmqproxy}: install the project (pip install -e '.[test]')"
    from spark_jobs import hold_report

    logs = tmp_path / "logs"
    # A sketch larger than any cell keeps every value: percentiles exact, so the tables are equal
    # however the input is split into tasks (here: 1 executor core vs 2 local threads).
    options = {"sketch_k": 65_535, "min_pulls": 1, "top": 5}
    with standalone_cluster(tmp_path / "cluster") as (url, env, registered):
        # the master and worker start while the log is made and reported on in local[2]
        _compacted_log(logs)
        hold_report.run(spark, [str(logs)], str(tmp_path / "local"), **options)
        registered()
        run = subprocess.run(
            [str(rmqproxy), "report", "-i", str(logs), "-o", str(tmp_path / "standalone"), "--master", url,
             "--sketch-k", str(options["sketch_k"]), "--min-pulls", str(options["min_pulls"]),
             "--top", str(options["top"]), "--conf", "spark.ui.enabled=false",
             "--conf", "spark.ui.showConsoleProgress=false", "--conf", "spark.sql.shuffle.partitions=4"],
            cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr[-6000:]
        # the executors ran in the worker's JVMs: their app's directory is under its work dir
        apps = sorted((tmp_path / "cluster" / "work").glob("app-*/*/stderr"))
        assert apps, "no executor ran on the standalone worker"
    local, local_tables = _outputs(tmp_path / "local")
    cluster, cluster_tables = _outputs(tmp_path / "standalone")
    assert local["events"] == 3_000 and local["rejected"] == 1, local
    # Run-specific, so left out: "output" (each run its own directory) and "seconds" (wall time).
    # The master is not in summary.json; everything else must match.
    for summary in (local, cluster):
        summary.pop("output")
        summary.pop("seconds")
    assert cluster == local
    assert sorted(cluster_tables) == sorted(local_tables) and len(cluster_tables) == 6
    assert cluster_tables == local_tables
