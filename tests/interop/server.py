"""Run ``rmqproxy serve`` as a separate process for the real-client scenarios.

::

    with RunningServer(message_delay_level=SHORT_DELAY_LEVELS) as server:
        ...  # clients use server.namesrv ("127.0.0.1:PORT") as namesrvAddr
        server.restart()  # SIGTERM, wait for exit, start again on the same port and store

The server is started as ``<python> -m rmqproxy.cli serve --bind-address 127.0.0.1 --listen-port PORT
--store-path-root-dir DIR [--message-delay-level ...] [-c broker.conf]``; it is ready once it prints a
line containing ``listening on 127.0.0.1:PORT``.  Its stdout and stderr go to ``<workdir>/server.log``
(every start appends), and failures quote the tail of that file.  ``start_target("apache")`` gives the
reference Apache RocketMQ broker (``apache_broker.ApacheBroker``) behind the same interface.
"""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Protocol, Self

__all__ = [
    "SHORT_DELAY_LEVELS",
    "RunningProxy",
    "RunningServer",
    "ScenarioServer",
    "ServerError",
    "free_port",
    "kill_amid_requests",
    "unread_by_connection",
    "serve_available",
    "start_target",
    "wait_for_line",
]

#: 18 delay levels of one second each: retries (send-back levels 3, 4, ...) come back after ~1 s.
SHORT_DELAY_LEVELS = " ".join(["1s"] * 18)


class ServerError(RuntimeError):
    """The server did not start, did not stop cleanly or died."""


class ScenarioServer(Protocol):
    """What the scenario tests need from a server under test (rmqproxy or the reference broker)."""

    name: str

    @property
    def namesrv(self) -> str: ...

    @property
    def broker_addr(self) -> str: ...

    def start(self) -> None: ...

    def restart(self) -> None: ...

    def kill(self) -> None: ...

    def crash(self) -> None: ...

    def stop(self) -> None: ...

    def log_tail(self, chars: int = 4000) -> str: ...

    def close(self) -> None: ...


_PICK = random.Random()  # seeded from os.urandom: each xdist worker draws its own ports


def _ephemeral_floor() -> int:
    """The lowest port the kernel hands out to outgoing connections (Linux default 32768)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(*, also_free: tuple[int, ...] = ()) -> int:
    """A TCP port that is free now, and so are ``port + d`` for each d in ``also_free``.

    The port is drawn below the kernel's ephemeral range: a port the kernel gave us would be handed
    out again to some process's outgoing connection, and the server that binds it later (a JVM
    broker starts seconds after we pick) would fail with "Address already in use".
    """
    high = _ephemeral_floor() - 1 - max(also_free, default=0)
    low = 10000 - min(also_free, default=0)
    for _ in range(500):
        port = _PICK.randint(low, high)
        if all(_port_free(port + d) for d in (0, *also_free)):
            return port
    raise ServerError("no free port found")


def _port_free(port: int) -> bool:
    if not 1024 < port < 65536:
        return False
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def wait_for_line(log: Path, needle: str, proc: subprocess.Popen[bytes], timeout: float, offset: int = 0) -> None:
    """Wait until ``log`` (read from byte ``offset``) contains ``needle``; raise if ``proc`` exits first."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(log, "rb") as f:
                f.seek(offset)
                if needle.encode() in f.read():
                    return
        except FileNotFoundError:
            pass
        if proc.poll() is not None:
            raise ServerError(f"{proc.args!r} exited with {proc.returncode} before printing {needle!r}")
        if time.monotonic() > deadline:
            raise ServerError(f"{proc.args!r} did not print {needle!r} within {timeout:.0f}s")
        time.sleep(0.05)


#: How long ``kill_amid_requests`` keeps a server stopped at most, waiting for every client
#: connection to carry a request the server has not read. The tests that use it give their
#: clients 1 s heartbeats, so each connection carries one within a second; a consumer's own
#: offsets go every 5 s, the first 10 s after its start. Past this the kill comes anyway.
AMID_REQUESTS_WAIT_S = 8.0


def unread_by_connection(ports: Collection[int]) -> dict[str, int]:
    """Each established TCP connection into one of ``ports`` on this machine (the server's side of
    it: "local port -> remote address") and the bytes waiting unread in its receive queue (Linux /proc)."""
    out = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            local_port = int(f[1].rsplit(":", 1)[1], 16)
            if f[3] == "01" and local_port in ports:  # 01: ESTABLISHED
                out[f"{local_port}<-{f[2]}"] = int(f[4].split(":")[1], 16)
    return out


def kill_amid_requests(pids: Sequence[int], ports: Collection[int], kill: Callable[[], None],
                       wait: float = AMID_REQUESTS_WAIT_S) -> None:  # fmt: skip
    """A crash while clients talk to the server: SIGSTOP the processes ``pids``, wait until every
    client connection into ``ports`` has a request the server has not read (at most ``wait`` s),
    then ``kill()`` them (SIGKILL).

    The server keeps what it had when stopped, as with a plain SIGKILL then. What differs is what
    its clients see: a socket closed with unread bytes is reset (RST), where a quiet one ends with a
    FIN. A Java 4.9.x client fails the requests in flight on a connection only when it closes the
    connection itself, which it does on a reset but not on a FIN (its ``NettyConnectManageHandler``
    has no ``channelInactive``; 5.x closes on both): after a FIN a pull the server held waits out
    its 30 s timeout before the consumer pulls that queue again. A test about what the server kept
    need not wait for that client gap."""
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and not all(unread_by_connection(ports).values()):
            time.sleep(0.05)
    finally:
        kill()


def _tail(path: Path, chars: int) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"


def _serve_help() -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "rmqproxy.cli", "serve", "--help"], check=False,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60,
    )
    return proc.stdout if proc.returncode == 0 else ""


def serve_available() -> bool:
    """True when this Python's rmqproxy has the ``serve`` command."""
    return "--listen-port" in _serve_help()


class ScratchServer:
    """A server under test in a working directory of its own: made in /tmp when none is given, and
    then removed on close unless RMQ_SCENARIO_KEEP is set. Closes as a context manager."""

    def __init__(self, workdir: Path | None, prefix: str) -> None:
        self._own_workdir = workdir is None
        self.workdir = Path(tempfile.mkdtemp(prefix=prefix)) if workdir is None else workdir
        self.workdir.mkdir(parents=True, exist_ok=True)

    def _halt(self) -> None:
        """Stop the server's processes (however it must)."""
        raise NotImplementedError

    def close(self) -> None:
        try:
            self._halt()
        finally:
            if self._own_workdir and not os.environ.get("RMQ_SCENARIO_KEEP"):
                shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RunningServer(ScratchServer):
    """One ``rmqproxy serve`` process on a free loopback port with a temporary store (context manager)."""

    name = "rmqproxy"
    START_TIMEOUT = 20.0
    STOP_TIMEOUT = 30.0

    def __init__(
        self,
        *,
        message_delay_level: str | None = SHORT_DELAY_LEVELS,
        broker_conf: dict[str, str] | None = None,
        workdir: Path | None = None,
        port: int | None = None,
        nofile: int | None = None,
        grpc: bool = False,
    ) -> None:
        super().__init__(workdir, "rmqproxy-scenario-")
        self.grpc_port = free_port() if grpc else 0  # the gRPC listener, off unless asked for
        self.nofile = nofile  # the process's fd limit (soft and hard), if given
        self.store_dir = self.workdir / "store"
        self.log_path = self.workdir / "server.log"
        self.port = port or free_port(also_free=(-2,))  # and its fast (VIP) port, port - 2
        self.message_delay_level = message_delay_level
        self.conf_path: Path | None = None
        self.broker_conf = dict(broker_conf or {})
        if broker_conf:
            self.conf_path = self.workdir / "broker.conf"
            self.conf_path.write_text("".join(f"{k}={v}\n" for k, v in broker_conf.items()))
        self._proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.start()

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def broker_addr(self) -> str:
        """The broker address routes point at: the same port (one process plays both roles)."""
        return self.namesrv

    @property
    def pid(self) -> int:
        """The serving process's id (for CPU and memory figures)."""
        if self._proc is None:
            raise ServerError("the server is not running")
        return self._proc.pid

    @property
    def command(self) -> list[str]:
        cmd = [
            sys.executable, "-m", "rmqproxy.cli", "serve",
            "--bind-address", "127.0.0.1",
            "--listen-port", str(self.port),
            "--store-path-root-dir", str(self.store_dir),
        ]
        if self.message_delay_level:
            cmd += ["--message-delay-level", self.message_delay_level]
        if self.conf_path is not None:
            cmd += ["-c", str(self.conf_path)]
        if "metricsPromExporterPort" not in self.broker_conf:
            cmd += ["--metrics-prom-exporter-port", "0"]  # the default 5557 would clash between servers
        if "grpcServerPort" not in self.broker_conf:
            cmd += ["--grpc-server-port", str(self.grpc_port)]  # the default 8081 likewise
        return cmd

    def start(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            raise ServerError("already running")
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            log.write(f"==== start #{self.starts + 1}: {' '.join(self.command)}\n".encode())
            log.flush()
            self._proc = subprocess.Popen(
                self.command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"}, preexec_fn=self._limit_fds,
            )
        self.starts += 1
        try:
            wait_for_line(self.log_path, f"listening on {self.namesrv}", self._proc, self.START_TIMEOUT, offset)
        except ServerError as e:
            self._kill()
            raise ServerError(f"{e}\n--- server log tail ---\n{self.log_tail()}") from None

    def _limit_fds(self) -> None:
        """In the child before exec: apply ``nofile`` (a server cannot raise past a hard limit)."""
        if self.nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (self.nofile, self.nofile))

    def stop(self) -> None:
        """SIGTERM and wait; raise if the process does not exit 0 within STOP_TIMEOUT."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=self.STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self._kill()
            raise ServerError(f"server did not exit within {self.STOP_TIMEOUT:.0f}s of SIGTERM\n{self.log_tail()}") from None
        if rc != 0:
            raise ServerError(f"server exited with {rc} after SIGTERM\n--- server log tail ---\n{self.log_tail()}")

    def restart(self) -> None:
        self.stop()
        self.start()

    @property
    def rss(self) -> int:
        """The serving process's resident set size, in bytes (Linux /proc)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise ServerError("no VmRSS for the server process")

    def kill(self) -> None:
        """SIGKILL, as a crash would stop it (``start()`` brings it back on the same store)."""
        self._kill()

    def crash(self) -> None:
        """SIGKILL amid clients' requests (``kill_amid_requests``; ``start()`` brings it back on the same store)."""
        kill_amid_requests([self.pid], {int(self.broker_addr.rsplit(":", 1)[1])}, self._kill)

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, chars: int = 4000) -> str:
        return _tail(self.log_path, chars)

    def _kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()

    def _halt(self) -> None:
        try:
            self.stop()
        finally:
            self._kill()

    def __repr__(self) -> str:
        return f"RunningServer(namesrv={self.namesrv!r}, workdir={str(self.workdir)!r})"


class RunningProxy(RunningServer):
    """One ``rmqproxy proxy`` process in front of the name servers ``upstream`` ("host:port[;...]"),
    its name-server port and a range of 16 broker ports free on loopback (context manager)."""

    name = "rmqproxy-proxy"
    BROKER_PORTS = 16

    def __init__(self, upstream: str, *, proxy_conf: dict[str, str] | None = None, workdir: Path | None = None,
                 port: int | None = None) -> None:  # fmt: skip
        self.upstream = upstream
        port = port or free_port(also_free=tuple(range(1, self.BROKER_PORTS + 1)))
        self.broker_ports = (port + 1, port + self.BROKER_PORTS)
        super().__init__(message_delay_level=None, broker_conf=proxy_conf, workdir=workdir, port=port)

    @property
    def broker_addr(self) -> str:
        """The first broker listener (routes name the others): the range's first port, or its third when
        each listener has its fast port at - 2 (rmqproxy/proxy/nodes.py)."""
        fast = self.broker_conf.get("fastPortEnable", "true").strip().lower() == "true"
        return f"127.0.0.1:{self.broker_ports[0] + (2 if fast else 0)}"

    @property
    def command(self) -> list[str]:
        cmd = [
            sys.executable, "-m", "rmqproxy.cli", "proxy",
            "--bind-address", "127.0.0.1",
            "--listen-port", str(self.port),
            "--namesrv-addr", self.upstream,
            "--proxy-broker-ports", f"{self.broker_ports[0]}-{self.broker_ports[1]}",
            "--pull-log-path", str(self.workdir / "pulls"),
        ]
        if self.conf_path is not None:
            cmd += ["-c", str(self.conf_path)]
        if "metricsPromExporterPort" not in self.broker_conf:
            cmd += ["--metrics-prom-exporter-port", "0"]
        return cmd

    @property
    def worker_pids(self) -> list[int]:
        """The worker processes of a proxy started with ``--workers N`` (none when it runs as one)."""
        try:
            return [int(p) for p in Path(f"/proc/{self.pid}/task/{self.pid}/children").read_text().split()]
        except (OSError, ServerError):
            return []

    @property
    def pids(self) -> list[int]:
        """The proxy's processes: the supervisor (or the single process) and its workers."""
        return [self.pid, *self.worker_pids]

    def _kill(self) -> None:
        """SIGKILL of every process of the proxy at once, workers included, as a crash of the machine would."""
        workers = self.worker_pids if self.alive() else []
        for pid in workers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        super()._kill()

    def pull_events(self) -> list[dict]:
        """Every pull event the proxy has logged so far (it flushes every 0.5 s)."""
        events = []
        for path in sorted((self.workdir / "pulls").glob("pulls-*.jsonl")):
            events += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return events


def start_target(kind: str, **kwargs: object) -> RunningServer:
    """Start the server under test: ``"rmqproxy"`` (default), ``"apache"`` (reference 4.9.7 broker) or
    ``"apache5"`` (the reference 5.x broker, for what 4.9.x lacks)."""
    if kind == "rmqproxy":
        return RunningServer(**kwargs)  # type: ignore[arg-type]
    if kind in ("apache", "apache5"):
        from .apache_broker import ApacheBroker

        return ApacheBroker(broker_5=kind == "apache5", **kwargs)  # type: ignore[arg-type,return-value]
    raise ValueError(f"unknown scenario target {kind!r} (rmqproxy, apache, or apache5: the 5.x broker)")
