"""One long-running JVM that runs real mqadmin commands (and the live clients they need) on request.

``AdminShell(program, namesrv)`` starts the scenario program's ``adminshell`` (``AdminShell.java``);
``shell.mqadmin("topicRoute", "-t", T)`` runs one command through ``MQAdminStartup.main0`` (``-n`` is
added) and returns ``{args, stdout, stderr, thrown, elapsed_ms}``; ``shell.op("send", topic=T, count=N)``
drives the shell's producer and push consumers (``send``, ``consume``, ``received``, ``stop``).
``TOOLS_LINES`` names the rocketmq-tools version used per client line (the issue's 4.9.7 and 5.3.1).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any, Protocol

from .scenario_runner import ScenarioError, ScenarioProgram, client_log_tail

__all__ = ["CONSOLE_TOOLS_VERSION", "TOOLS_LINES", "AdminShell", "ShellTarget", "poll"]

#: rocketmq-tools (and the shell's own client) version per client line: what issue 30 names.
TOOLS_LINES: dict[str, str] = {
    "4.9": os.environ.get("RMQ_TOOLS_VERSION_4_9", "4.9.7"),
    "5": os.environ.get("RMQ_TOOLS_VERSION_5", "5.3.1"),
}
#: rocketmq-tools (and client) version of the console: rocketmq-dashboard 2.1.0's pom (rocketmq.version)
CONSOLE_TOOLS_VERSION = os.environ.get("RMQ_CONSOLE_TOOLS_VERSION", "5.3.3")


class AdminShell:
    """A running ``adminshell`` scenario: one request line in, one ``REPLY {json}`` line out."""

    def __init__(self, program: ScenarioProgram, namesrv: str, *, producer_group: str, start_timeout: float = 60) -> None:
        self.program = program
        cmd, self.log_dir, env = program._prepare("adminshell", {"namesrv": namesrv, "producer_group": producer_group})
        self._err = open(self.log_dir / "stderr.txt", "wb")  # noqa: SIM115 (closed by close)
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err, env=env)
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.transcript: list[str] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._pump, daemon=True).start()
        self._wait_for("READY ", start_timeout)

    def _pump(self) -> None:
        assert self._proc.stdout is not None
        for raw in self._proc.stdout:
            self._lines.put(raw.decode(errors="replace").rstrip("\n"))
        self._lines.put(None)

    def _wait_for(self, prefix: str, timeout: float) -> str:
        """The rest of the next stdout line starting with ``prefix`` (other lines go to the transcript)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ScenarioError(self._explain(f"adminshell printed no {prefix.strip()} line within {timeout:.0f}s"))
            try:
                line = self._lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                self._lines.put(None)  # keep the end marker for later readers
                raise ScenarioError(self._explain(f"adminshell ended while waiting for {prefix.strip()}"))
            if line.startswith(prefix):
                return line[len(prefix):]
            self.transcript.append(line)

    def _request(self, payload: Any, timeout: float) -> dict[str, Any]:
        with self._lock:
            assert self._proc.stdin is not None
            self._proc.stdin.write((json.dumps(payload) + "\n").encode())
            self._proc.stdin.flush()
            reply: dict[str, Any] = json.loads(self._wait_for("REPLY ", timeout))
            return reply

    def mqadmin(self, *args: str, timeout: float = 60) -> dict[str, Any]:
        """Run ``mqadmin ARGS -n NAMESRV`` in the shell; the reply carries stdout, stderr, thrown."""
        reply = self._request([str(a) for a in args], timeout)
        self.transcript.append(f"$ mqadmin {' '.join(reply.get('args', args))} ({reply.get('elapsed_ms')} ms)\n"
                               f"{reply.get('stdout', '')}{reply.get('stderr', '')[-800:]}{reply.get('thrown') or ''}")
        return reply

    def op(self, name: str, *, timeout: float = 60, **fields: Any) -> dict[str, Any]:
        """A client operation: send, consume, received, stop (see AdminShell.java)."""
        reply = self._request({"op": name, **fields}, timeout)
        if "thrown" in reply:
            raise ScenarioError(self._explain(f"adminshell op {name} {fields} threw {reply['thrown']}"))
        return reply

    def wait_received(self, consumer: str, done: Any, timeout: float = 30, what: str = "") -> dict[str, Any]:
        """Poll ``received`` of ``consumer`` until ``done(reply)`` is true; fail with the last reply."""
        deadline = time.monotonic() + timeout
        while True:
            got = self.op("received", id=consumer)
            if done(got):
                return got
            if time.monotonic() > deadline:
                raise AssertionError(f"{what or 'consumer'}: condition not met within {timeout:.0f}s; "
                                     f"last {json.dumps(got)[:1500]}\n" + self._explain("", tail=4000))
            time.sleep(0.2)

    def _explain(self, what: str, tail: int = 3000) -> str:
        text = "\n".join(self.transcript)[-tail:]
        err = self.log_dir / "stderr.txt"
        stderr = err.read_text(errors="replace")[-2000:] if err.exists() else ""
        return (f"{what} (tools {self.program.version})\n--- shell transcript ---\n{text}\n--- stderr ---\n{stderr}\n"
                f"--- client log (warnings) ---\n{client_log_tail(Path(self.log_dir), 1500)}")

    def close(self) -> None:
        """Stop the shell (its transcript is kept in ``log_dir/transcript.txt``)."""
        (self.log_dir / "transcript.txt").write_text("\n".join(self.transcript))
        if self._proc.poll() is None:
            try:
                assert self._proc.stdin is not None
                self._proc.stdin.write(b"stop\n")
                self._proc.stdin.close()
                self._proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()
        if not self._err.closed:
            self._err.close()


class ShellTarget(Protocol):
    """A server under test with the shell that drives it (a test module's per-target record)."""

    server: Any  # server.ScenarioServer
    shell: AdminShell


def failure_text(target: ShellTarget, what: str) -> str:
    """``what``, with the shell's transcript and the server's log tail: a failure a reader can follow."""
    return (f"{what}\n{target.shell._explain('', tail=6000)}\n--- server ({target.server.name}) log ---\n"
            f"{target.server.log_tail(2500)}")  # fmt: skip


def poll(target: ShellTarget, what: str, probe: Callable[[], Any], done: Callable[[Any], bool],
         timeout: float = 20) -> Any:  # fmt: skip
    """Call ``probe`` until ``done`` of its value holds (every 0.5 s), or fail with the last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if done(value):
            return value
        if time.monotonic() > deadline:
            shown = value if isinstance(value, str) else json.dumps(value)[:3000]
            raise AssertionError(failure_text(target, f"{what}: not within {timeout:.0f}s; last:\n{shown}"))
        time.sleep(0.5)
