"""hold_report on a real event log: ``rmqproxy serve`` driven by the Apache RocketMQ 4.9.8 Java
client (tests/interop/java/HoldLatency.java: an idle push consumer whose pulls time out at 15 s,
then three messages that wake held pulls), and the same client through ``rmqproxy proxy`` in front
of the 4.9.7 broker. The two clients are mostly waits, so they run side by side, and from the start
of the Spark tests on, beside them (``real_log_runs`` in conftest.py); each test reads its own log."""

from __future__ import annotations

import concurrent.futures
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.interop.oracle import build_classpath
from tests.interop.server import RunningServer
from tests.interop.test_hold_latency import PROGRAM
from tests.needs import require_java_tools

SERVE_TOPIC = "SparkHoldReport"
PROXY_TOPIC = "SparkHoldReportViaProxy"


def _hold_latency(namesrv: str, topic: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["java", "-cp", build_classpath("4.9"), str(PROGRAM), namesrv, topic, "3", "1500", "16000"],
        check=False, capture_output=True, text=True, timeout=180,
    )  # fmt: skip


def run_clients(root: Path) -> dict[str, dict[str, Any]]:
    """The client run against ``rmqproxy serve`` and the one through the proxy, at the same time:
    per case its process, the directory of the pull log, and (proxy) the proxy's pull events."""
    from tests.interop.apache_broker import ApacheBroker
    from tests.interop.server import RunningProxy

    with (
        RunningServer(workdir=root / "server") as server,
        ApacheBroker() as broker,
        RunningProxy(broker.namesrv, workdir=root / "proxy") as proxy,
        concurrent.futures.ThreadPoolExecutor(2) as pool,
    ):
        serve_f = pool.submit(_hold_latency, server.namesrv, SERVE_TOPIC)
        proxy_f = pool.submit(_hold_latency, proxy.namesrv, PROXY_TOPIC)
        serve_run, proxy_run = serve_f.result(), proxy_f.result()
        proxy_events = [e for e in proxy.pull_events() if e["topic"] == PROXY_TOPIC]
    return {
        "serve": {"run": serve_run, "log_dir": server.store_dir / "logs"},
        "proxy": {"run": proxy_run, "log_dir": proxy.workdir / "pulls", "events": proxy_events},
    }


@pytest.fixture(scope="module")
def client_runs(spark: object, real_log_runs: concurrent.futures.Future | None) -> dict[str, dict[str, Any]]:
    """``run_clients``' outcome: started with the Spark tests (conftest.py), as it is mostly waits."""
    require_java_tools("the hold report on a real log")
    assert real_log_runs is not None, "conftest.py starts the runs whenever a test of this module is selected"
    return real_log_runs.result()


@pytest.mark.interop
def test_hold_report_on_a_log_written_by_rmqproxy_serve_for_the_java_client(spark, client_runs, tmp_path) -> None:
    from spark_jobs import hold_report

    topic = SERVE_TOPIC
    run, log_dir = client_runs["serve"]["run"], client_runs["serve"]["log_dir"]
    assert run.returncode == 0, run.stderr[-3000:]
    lines = [x for p in sorted(log_dir.glob("pulls-*.jsonl")) for x in p.read_text().splitlines()]
    mine = [json.loads(x) for x in lines if json.loads(x)["topic"] == topic]

    out = tmp_path / "report"
    summary = hold_report.run(spark, [str(log_dir)], str(out), min_pulls=1)

    assert (summary["events"], summary["rejected"]) == (len(lines), 0)
    rows = {(r["group"], r["topic"]): r for r in spark.read.parquet(str(out / "group_topic")).collect()}
    row = rows[f"{topic}-cg", topic]
    assert row["pulls"] == len(mine)
    assert row["timeouts"] == sum(e["wake"] == "timeout" for e in mine) >= 1
    assert row["wake_arrival_share"] * row["pulls"] == pytest.approx(sum(e["wake"] == "arrival" for e in mine))
    assert sum(e["wake"] == "arrival" for e in mine) >= 3
    # held pulls that timed out were answered at the client's 15 s suspend time, a few ms late at most
    assert 0 <= row["overshoot_ms_max"] < 200
    assert 14_990 <= row["hold_ms_max"] < 15_200
    assert row["service_ms_p50"] < 50
    assert row["msgs"] == sum(e["msgs"] for e in mine) >= 3
    html = (out / "report.html").read_text()
    assert f"<td>{topic}-cg</td><td>{topic}</td>" in html


@pytest.mark.interop
def test_hold_report_on_a_log_written_by_rmqproxy_proxy_in_front_of_apache(spark, client_runs, tmp_path) -> None:
    """The same client through ``rmqproxy proxy`` in front of the 4.9.7 broker: the report reads the
    proxy's log unchanged; timeouts come at the client's 15 s (the broker alone answers up to 5 s
    later), and the pulls the broker answered once messages came are ``wake=upstream``."""
    from spark_jobs import hold_report

    topic = PROXY_TOPIC
    run, log_dir, mine = (client_runs["proxy"][k] for k in ("run", "log_dir", "events"))
    assert run.returncode == 0, run.stderr[-3000:]

    out = tmp_path / "report"
    summary = hold_report.run(spark, [str(log_dir)], str(out), min_pulls=1)

    assert summary["rejected"] == 0
    rows = {(r["group"], r["topic"]): r for r in spark.read.parquet(str(out / "group_topic")).collect()}
    row = rows[f"{topic}-cg", topic]
    assert row["pulls"] == len(mine)
    assert row["timeouts"] == sum(e["wake"] == "timeout" for e in mine) >= 1
    assert sum(e["wake"] == "upstream" for e in mine) >= 1
    assert 0 <= row["overshoot_ms_max"] < 200
    assert 14_990 <= row["hold_ms_max"] < 15_200
    assert row["msgs"] == sum(e["msgs"] for e in mine) >= 3
