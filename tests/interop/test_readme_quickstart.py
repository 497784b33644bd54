"""The README's Java quick start, extracted and run as written against ``rmqproxy serve``."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from .oracle import build_classpath
from .server import RunningServer

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_java_quickstart_works_as_written(oracle_line, tmp_path) -> None:
    (snippet,) = re.findall(r"```java\n(.*?)```", README.read_text(), re.S)
    source = tmp_path / "Quickstart.java"
    source.write_text(snippet)
    classpath = build_classpath(oracle_line)  # the oracle's classpath carries rocketmq-client
    with RunningServer() as server:
        run = subprocess.run(
            ["java", "-cp", classpath, str(source), server.namesrv],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    out = run.stdout
    assert run.returncode == 0, run.stderr[-3000:]
    assert out.count("sent SEND_OK") == 10
    assert sorted(re.findall(r"received (hello \d)", out)) == [f"hello {i}" for i in range(10)]
    assert "received all: true" in out
