"""Issue 7 with real clients: messages reach an idle push consumer well under 100 ms after their
send (the Java client's own timestamps), woken by ``arrival``; with no producer, held pulls end
by ``timeout`` after the client's 15 s suspend time. The messages go 1.5 s apart: each finds the
consumer idle, its pull held since the previous message."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from .oracle import build_classpath
from .server import RunningServer

PROGRAM = Path(__file__).resolve().parent / "java" / "HoldLatency.java"


def test_idle_consumer_gets_each_message_at_once_and_idle_pulls_time_out(oracle_line, tmp_path) -> None:
    topic = f"HoldLatency{oracle_line.replace('.', '')}"
    with RunningServer(workdir=tmp_path / "server") as server:
        run = subprocess.run(
            ["java", "-cp", build_classpath(oracle_line), str(PROGRAM), server.namesrv, topic, "3", "1500", "16000"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        log_dir = server.store_dir / "logs"
    assert run.returncode == 0, run.stderr[-3000:]
    (line,) = [x for x in run.stdout.splitlines() if x.startswith("RESULT ")]
    result = json.loads(line[len("RESULT "):])
    print(f"{oracle_line}: send-to-consume latency {result['latency_ms']} ms")
    assert result["all"], result
    assert all(latency is not None and latency < 100 for latency in result["latency_ms"]), result

    events = [json.loads(x) for p in sorted(log_dir.glob("pulls-*.jsonl")) for x in p.read_text().splitlines()]
    mine = [e for e in events if e["topic"] == topic and e["held"]]
    arrivals = [e for e in mine if e["wake"] == "arrival" and e["code"] == "SUCCESS"]
    timeouts = [e for e in mine if e["wake"] == "timeout"]
    assert len(arrivals) >= 3
    assert timeouts and all(e["code"] == "PULL_NOT_FOUND" for e in timeouts)
    assert all(14_990 <= e["hold_ms"] <= 15_200 and e["suspend_ms"] == 15000 for e in timeouts), timeouts[:3]
