"""Run the gRPC-client program (``grpc_client/``, ``rmqproxy.grpcclient.Main``) and read its RESULT.

``GrpcClientProgram()`` builds the program for rocketmq-client-java (5.0.8 by default) and runs scenarios::

    prog = GrpcClientProgram(log_root=tmp_path)
    result = prog.run("send", endpoint="127.0.0.1:8081", topic="T", kind="fifo", count=20)

Options are passed as ``--key value`` (``count=20`` -> ``--count 20``, ``nack_first=True`` ->
``--nack-first true``; None is left out).  ``run`` waits for the process (bounded by ``timeout_ms``,
which the program also enforces on itself) and returns the parsed ``RESULT {json}``, plus ``_log_dir``
and ``_wall_s`` (the JVM's whole run, start-up included).  The JVM's stderr and the client's log
(``rocketmq_client.log``, see ``grpc_client/.../FileLog.java``) go to a directory per run under
``log_root``, with its stdout (``stdout.txt``), and are quoted in failures (``GrpcClientError``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .maven import build_classpath
from .scenario_runner import client_log_tail, tail_of

__all__ = ["CLIENT_JAVA_VERSION", "GRPC_CLIENT_DIR", "GrpcClientError", "GrpcClientProgram", "program_classpath"]

GRPC_CLIENT_DIR = Path(__file__).resolve().parent / "grpc_client"
CLIENT_JAVA_VERSION = os.environ.get("RMQ_GRPC_CLIENT_VERSION", "5.0.8")
MAIN_CLASS = "rmqproxy.grpcclient.Main"
#: The scenario program's JSON writer, which the pom compiles into this program too.
SHARED_JSON = GRPC_CLIENT_DIR.parent / "scenarios" / "src" / "main" / "java" / "rmqproxy" / "scenarios" / "Json.java"
#: Left out of the program's environment, as scenario_runner does: RocketMQ variables of the shell.
_DROPPED_ENV = ("NAMESRV_ADDR", "ROCKETMQ_HOME")
_JVM_FLAGS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto", "-Xmx256m", "-Dfile.encoding=UTF-8"]


class GrpcClientError(AssertionError):
    """The program printed no single RESULT line in time (its stderr and client log are quoted)."""


def _options(opts: dict[str, Any]) -> list[str]:
    args: list[str] = []
    for k, v in opts.items():
        if v is None:
            continue
        value = str(v).lower() if isinstance(v, bool) else str(v)
        args += [f"--{k.replace('_', '-')}", value]
    return args


def program_classpath(version: str = CLIENT_JAVA_VERSION) -> str:
    """The gRPC-client program built for rocketmq-client-java ``version`` (Maven on first use)."""
    return build_classpath(GRPC_CLIENT_DIR, version, marker="rmqproxy/grpcclient/Main.class", shared=(SHARED_JSON,))


class GrpcClientProgram:
    """The gRPC-client program built for one rocketmq-client-java version."""

    def __init__(self, version: str = CLIENT_JAVA_VERSION, *, log_root: Path) -> None:
        self.version = version
        self.classpath = program_classpath(version)
        self.log_root = log_root
        log_root.mkdir(parents=True, exist_ok=True)

    def command(self, scenario: str, log_dir: Path, *, jvm_args: Sequence[str] = (), **opts: Any) -> list[str]:
        return [
            shutil.which("java") or "java", *_JVM_FLAGS,
            f"-Drocketmq.log.root={log_dir}",
            f"-Duser.home={log_dir}",  # anything the client writes under ~ stays in the run's directory
            *jvm_args,
            "-cp", self.classpath, MAIN_CLASS, scenario, *_options(opts),
        ]  # fmt: skip

    def run(
        self, scenario: str, *, timeout_ms: int = 120_000, jvm_args: Sequence[str] = (), **opts: Any
    ) -> dict[str, Any]:
        """Run one scenario to completion and return its RESULT object (failed client calls are in it,
        as "error"; only a missing RESULT, or anything else on stdout, raises)."""
        log_dir = self.log_root / f"{scenario}-{uuid.uuid4().hex[:6]}"
        log_dir.mkdir(parents=True)
        cmd = self.command(scenario, log_dir, jvm_args=jvm_args, timeout_ms=timeout_ms, **opts)
        env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
        wait_s = timeout_ms / 1000 + 30  # the program's own watchdog ends it at timeout_ms
        started = time.monotonic()
        with open(log_dir / "stderr.txt", "wb") as err:
            try:
                proc = subprocess.run(cmd, check=False, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                                      env=env, timeout=wait_s)  # fmt: skip
            except subprocess.TimeoutExpired as e:
                out = (e.stdout or b"").decode(errors="replace")
                raise GrpcClientError(self._explain(f"{scenario} did not exit within {wait_s:.0f}s", out, log_dir)) from None
        out = proc.stdout.decode(errors="replace")
        (log_dir / "stdout.txt").write_text(out)
        lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
        if len(lines) != 1 or len(out.splitlines()) != 1:
            what = f"{scenario} printed {len(lines)} RESULT lines in {len(out.splitlines())} (exit {proc.returncode})"
            raise GrpcClientError(self._explain(what, out, log_dir))
        result: dict[str, Any] = json.loads(lines[0][len("RESULT "):])
        result["_log_dir"] = str(log_dir)
        result["_wall_s"] = round(time.monotonic() - started, 3)
        return result

    def _explain(self, what: str, out: str, log_dir: Path) -> str:
        return (
            f"{what} (rocketmq-client-java {self.version})\n--- stdout tail ---\n{out[-3000:]}\n"
            f"--- stderr tail ---\n{tail_of(log_dir / 'stderr.txt', 3000)}\n"
            f"--- client log tail ---\n{client_log_tail(log_dir)}"
        )
