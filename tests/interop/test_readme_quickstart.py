"""The README's Java quick start, extracted and run as written against ``rmqproxy serve``."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from .apache_proxy import ReferenceAdmin
from .grpc_runner import GrpcClientProgram
from .oracle import build_classpath
from .server import RunningServer

README = Path(__file__).resolve().parents[2] / "README.md"


def _snippet(class_name: str) -> str:
    """The README's Java block that declares ``public class <class_name>``."""
    (snippet,) = [s for s in re.findall(r"```java\n(.*?)```", README.read_text(), re.S) if f"public class {class_name} " in s]
    return snippet


def test_readme_java_quickstart_works_as_written(oracle_line, tmp_path) -> None:
    snippet = _snippet("Quickstart")
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


def test_readme_grpc_quickstart_works_as_written(tmp_path) -> None:
    """The gRPC example, with the README's mqadmin command first (rocketmq-tools 5.3.3)."""
    (command,) = re.findall(r"```\n(mqadmin updateTopic[^\n]*)\n```", README.read_text())
    source = tmp_path / "GrpcQuickstart.java"
    source.write_text(_snippet("GrpcQuickstart"))
    program = GrpcClientProgram(log_root=tmp_path / "logs")
    with RunningServer(grpc=True) as server:
        args = command.split()[1:]
        args[args.index("-n") + 1] = server.namesrv
        ReferenceAdmin(tmp_path / "admin").mqadmin(*args[:args.index("-n")], *args[args.index("-n") + 2:],
                                                   namesrv=server.namesrv)  # fmt: skip
        run = subprocess.run(["java", "-cp", program.classpath, str(source), f"127.0.0.1:{server.grpc_port}"],
                             capture_output=True, text=True, timeout=120)  # fmt: skip
    out = run.stdout
    assert run.returncode == 0, run.stderr[-3000:]
    assert out.count("sent ") == 10
    assert sorted(re.findall(r"received (hello \d)", out)) == [f"hello {i}" for i in range(10)]
    assert "received all: true" in out
