"""Run the Java scenario program (``scenarios/``, ``rmqproxy.scenarios.Main``) and read its RESULT.

``ScenarioProgram(line)`` builds the program for a client line ("4.9" -> 4.9.8, "5" -> 5.5.0, the
oracle's versions and environment overrides) and runs scenarios::

    prog = ScenarioProgram("4.9", log_root=tmp_path)
    result = prog.run("send", namesrv="127.0.0.1:9876", topic="T", manifest="/tmp/m.tsv")

``run`` waits for the process and returns the parsed ``RESULT {json}`` line; ``start`` returns a
``RunningScenario`` for the restart scenario (progress lines, stdin, result); both take
``jvm_args``, JVM options to add (e.g. ``["-Dtls.enable=true"]``, the client's TLS switch).  The JVM's
stderr and the RocketMQ client log go to ``log_root`` and are quoted in failures (``ScenarioError``).
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .maven import build_classpath
from .oracle import ORACLE_LINES

__all__ = ["SCENARIOS_DIR", "RunningScenario", "ScenarioError", "ScenarioProgram", "program_classpath", "tail_of", "unique_name"]

SCENARIOS_DIR = Path(__file__).resolve().parent / "scenarios"
MAIN_CLASS = "rmqproxy.scenarios.Main"
_JVM_FLAGS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto", "-Xmx512m", "-Dfile.encoding=UTF-8"]


class ScenarioError(AssertionError):
    """The program did not print a RESULT line in time (its stderr and client log are quoted)."""


def unique_name(kind: str, line: str) -> str:
    """A topic/group name valid for RocketMQ (``^[%|a-zA-Z0-9_-]+$``), unique per call."""
    return f"{kind}_{re.sub(r'[^0-9A-Za-z]', '', line)}_{uuid.uuid4().hex[:8]}"


def _options(opts: dict[str, Any]) -> list[str]:
    args: list[str] = []
    for k, v in opts.items():
        if v is not None:
            args += [f"--{k.replace('_', '-')}", str(v)]
    return args


def tail_of(path: Path, chars: int) -> str:
    """The last ``chars`` characters of a log file, or "(none)"."""
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "(none)"


def program_classpath(version: str) -> str:
    """The scenario program built for RocketMQ ``version`` (Maven on first use), as a classpath."""
    return build_classpath(SCENARIOS_DIR, version, marker="rmqproxy/scenarios/Main.class")


class ScenarioProgram:
    """The scenario program built for one client line."""

    def __init__(self, line: str, *, log_root: Path) -> None:
        self.line = line
        self.version = ORACLE_LINES.get(line, line)
        self.classpath = program_classpath(self.version)
        self.log_root = log_root
        log_root.mkdir(parents=True, exist_ok=True)

    def command(self, scenario: str, log_dir: Path, *, jvm_args: Sequence[str] = (), **opts: Any) -> list[str]:
        return [
            shutil.which("java") or "java", *_JVM_FLAGS,
            f"-Drocketmq.client.logRoot={log_dir}",  # 4.9.x client log
            f"-Drocketmq.log.root={log_dir}",  # 5.x client log (scenarios' rmq.logback.xml)
            *jvm_args,
            "-cp", self.classpath, MAIN_CLASS, scenario, *_options(opts),
        ]

    def _prepare(self, scenario: str, opts: dict[str, Any],
                 jvm_args: Sequence[str] = ()) -> tuple[list[str], Path, dict[str, str]]:
        log_dir = self.log_root / f"{scenario}-{uuid.uuid4().hex[:6]}"
        log_dir.mkdir(parents=True)
        env = dict(os.environ)
        for var in ("ROCKETMQ_SERIALIZE_TYPE", "NAMESRV_ADDR", "ROCKETMQ_HOME"):
            env.pop(var, None)
        return self.command(scenario, log_dir, jvm_args=jvm_args, **opts), log_dir, env

    def run(self, scenario: str, *, timeout: float = 240.0, jvm_args: Sequence[str] = (), **opts: Any) -> dict[str, Any]:
        """Run one scenario to completion and return its RESULT object."""
        cmd, log_dir, env = self._prepare(scenario, opts, jvm_args)
        stderr_path = log_dir / "stderr.txt"
        with open(stderr_path, "wb") as err:
            try:
                proc = subprocess.run(cmd, check=False, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                                      env=env, timeout=timeout)
            except subprocess.TimeoutExpired as e:
                out = (e.stdout or b"").decode(errors="replace")
                raise ScenarioError(self._explain(f"{scenario} did not finish within {timeout:.0f}s", out, log_dir)) from None
        out = proc.stdout.decode(errors="replace")
        return self._result(scenario, out, log_dir)

    def start(self, scenario: str, *, jvm_args: Sequence[str] = (), **opts: Any) -> RunningScenario:
        """Start a scenario that talks over stdin/stdout while it runs (the restart scenario)."""
        cmd, log_dir, env = self._prepare(scenario, opts, jvm_args)
        return RunningScenario(self, scenario, cmd, log_dir, env)

    def _result(self, scenario: str, out: str, log_dir: Path) -> dict[str, Any]:
        lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
        if len(lines) != 1:
            raise ScenarioError(self._explain(f"{scenario} printed {len(lines)} RESULT lines", out, log_dir))
        result: dict[str, Any] = json.loads(lines[0][len("RESULT "):])
        result["_log_dir"] = str(log_dir)
        result["_progress"] = [ln for ln in out.splitlines() if not ln.startswith("RESULT ")][-40:]
        return result

    def _explain(self, what: str, out: str, log_dir: Path) -> str:
        return (
            f"{what} (client {self.version})\n--- stdout tail ---\n{out[-3000:]}\n"
            f"--- stderr tail ---\n{tail_of(log_dir / 'stderr.txt', 3000)}\n"
            f"--- client log tail ---\n{client_log_tail(log_dir)}"
        )


def client_log_tail(log_dir: Path | str, chars: int = 3000) -> str:
    """WARN/ERROR lines (and exception lines) of the RocketMQ client log of one run, last ``chars``."""
    log_dir = Path(log_dir)
    texts = []
    for path in sorted(log_dir.rglob("rocketmq_client*.log")):
        keep = [ln for ln in path.read_text(errors="replace").splitlines()
                if re.search(r"\b(WARN|ERROR)\b|Exception|CODE:", ln)]
        texts.append("\n".join(keep))
    text = "\n".join(texts)
    return text[-chars:] if text else "(no warnings)"


def _counts(progress_line: str) -> dict[str, int]:
    """The counts of a "PROGRESS sent=N received=N ..." line."""
    return {k: int(v) for k, v in (kv.split("=", 1) for kv in progress_line.split()[1:])}


class RunningScenario:
    """A scenario process whose stdout lines are read as they come."""

    def __init__(self, program: ScenarioProgram, scenario: str, cmd: list[str], log_dir: Path, env: dict[str, str]) -> None:
        self.program = program
        self.scenario = scenario
        self.log_dir = log_dir
        self._err = open(log_dir / "stderr.txt", "wb")  # noqa: SIM115 (closed by finish/kill)
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err, env=env)
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.output: list[str] = []
        self.progress: dict[str, int] = {}
        #: (time.monotonic() when it was printed, its counts) of every PROGRESS line, for pauses
        self.timeline: list[tuple[float, dict[str, int]]] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self._proc.stdout is not None
        for raw in self._proc.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            if line.startswith("PROGRESS "):
                self.timeline.append((time.monotonic(), _counts(line)))
            self._lines.put(line)
        self._lines.put(None)

    def _take(self, timeout: float) -> str | None:
        line = self._lines.get(timeout=timeout)
        if line is None:
            self._lines.put(None)  # keep the end marker for later readers
            return None
        self.output.append(line)
        if line.startswith("PROGRESS "):
            self.progress = _counts(line)
        return line

    def wait_progress(self, key: str, at_least: int, timeout: float) -> dict[str, int]:
        """Read lines until a PROGRESS line has ``key >= at_least``; raise ScenarioError on timeout or exit."""
        deadline = time.monotonic() + timeout
        while self.progress.get(key, -1) < at_least:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ScenarioError(self.program._explain(
                    f"{self.scenario}: {key} stayed below {at_least} for {timeout:.0f}s (last {self.progress})",
                    "\n".join(self.output), self.log_dir))
            try:
                if self._take(min(left, 1.0)) is None:
                    raise ScenarioError(self.program._explain(
                        f"{self.scenario} ended while waiting for {key} >= {at_least}", "\n".join(self.output), self.log_dir))
            except queue.Empty:
                continue
        return dict(self.progress)

    def drain(self) -> dict[str, int]:
        """Read every line already printed (without waiting) and return the latest progress."""
        try:
            while self._take(0) is not None:
                pass
        except queue.Empty:
            pass
        return dict(self.progress)

    def finish(self, timeout: float = 120.0) -> dict[str, Any]:
        """Tell the program to stop (a line on stdin) and return its RESULT."""
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(b"stop\n")
            self._proc.stdin.close()
        except OSError:
            pass
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise ScenarioError(self.program._explain(
                    f"{self.scenario} gave no RESULT within {timeout:.0f}s of stop", "\n".join(self.output), self.log_dir))
            try:
                if self._take(left) is None:
                    break
            except queue.Empty:
                continue
        self._proc.wait(timeout=30)
        self._err.close()
        return self.program._result(self.scenario, "\n".join(self.output), self.log_dir)

    def kill(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        if not self._err.closed:
            self._err.close()
