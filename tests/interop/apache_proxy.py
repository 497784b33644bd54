"""The reference Apache RocketMQ 5.3.3 gRPC proxy (local mode, broker embedded) and its name server.

The baseline for the gRPC-client interop tests (``grpc_client/``, run by ``grpc_runner.GrpcClientProgram``)::

    with ApacheProxy() as ref:
        ref.create_topic("T", "FIFO")
        ref.create_group("G", orderly=True)
        ...  # clients use ref.endpoint ("127.0.0.1:PORT") as their gRPC endpoint

Two JVMs from the Maven Central artifacts of ``scenarios/reference-proxy/pom.xml`` (rocketmq-namesrv 5.3.3
is published there, unlike 5.3.1): ``NamesrvStartup`` and ``ProxyStartup -pm local``, which builds a
``BrokerController`` from its ``-bc`` broker.conf in the same JVM and serves gRPC (``grpcServerPort``) and
remoting (``remotingListenPort``) in front of it.  Each on free loopback ports (the broker also binds
``port - 2`` and ``port + 1``), with a temporary ``ROCKETMQ_HOME``, store and ``user.home``; 5.x logs
under ``user.home/logs/rocketmqlogs/`` (proxy.log, broker.log, ...; the name server has a ``user.home``
of its own), which ``log_tail`` quotes with the JVMs' output.  Ready once the broker has registered with
the name server (about 25 s from the start on 2 cores).

Topics are made with a message type (``create_topic``: the proxy refuses a FIFO send to a NORMAL topic
and so on) and groups with their orderliness and retry count (``create_group``), straight at the broker
by ``rmqproxy.refproxy.Admin`` (``scenarios/reference-proxy/src``; ``create`` makes several in one JVM,
about 1.5 s, where ``mqadmin updateTopic`` spends 4-6 s, most of it in its admin client's shutdown);
``mqadmin(...)`` runs any other ``MQAdminStartup`` command.

TLS: ``tls_mode`` is the proxy JVM's ``tls.server.mode`` (permissive, the default: TLS and plaintext on
the same port; enforcing: a plaintext client's connection is closed; disabled) and the certificate is
the self-signed one of ``tlsTestModeEnable`` (proxy) / ``tls.test.mode.enable`` (broker remoting).  The
name server stays permissive.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from .apache_broker import (
    CLUSTER_NAME,
    JvmPair,
    NAMESRV_BOOT_LINE,
    NAMESRV_MAIN,
    TEST_JVM,
    ReferenceJvm,
    broker_properties,
    make_home,
    namesrv_properties,
    tail_logs,
    write_properties,
)
from .maven import build_classpath
from .server import SHORT_DELAY_LEVELS, ServerError, free_port, wait_for_line

__all__ = ["MESSAGE_TYPES", "REFERENCE_PROXY_VERSION", "AdminError", "ApacheProxy", "ReferenceAdmin",
           "reference_proxy_classpath"]

REFERENCE_PROXY_VERSION = os.environ.get("RMQ_REFERENCE_PROXY_VERSION", "5.3.3")
PROJECT = Path(__file__).resolve().parent / "scenarios" / "reference-proxy"

PROXY_MAIN = "org.apache.rocketmq.proxy.ProxyStartup"
PROXY_BOOT_LINE = "rocketmq-proxy startup successfully"
#: What the embedded broker logs (broker.log) once the name server has its routes.
REGISTERED_LINE = "Registering current broker to name server completed"
MQADMIN_MAIN = "org.apache.rocketmq.tools.command.MQAdminStartup"
ADMIN_MAIN = "rmqproxy.refproxy.Admin"
#: The topic attribute ``message.type`` values of 5.x (``TopicMessageType``; MIXED accepts all kinds).
MESSAGE_TYPES = ("NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED")
TLS_MODES = ("permissive", "enforcing", "disabled")
#: A short-lived mqadmin JVM: one command, then exit.
_ADMIN_JVM = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-Dfile.encoding=UTF-8"]


class AdminError(ServerError):
    """An mqadmin command failed (its output is in the message)."""


def reference_proxy_classpath() -> str:
    """The runtime classpath of rocketmq-proxy, rocketmq-namesrv and rocketmq-tools, led by our Admin class
    (Maven on first use)."""
    return build_classpath(PROJECT, REFERENCE_PROXY_VERSION, marker="rmqproxy/refproxy/Admin.class")


class _ProxyJvm(ReferenceJvm):
    """``ProxyStartup`` takes ``-pm local -bc BROKER_CONF -pc PROXY_JSON`` where the other startups take ``-c``."""

    def __init__(self, *, broker_conf: Path, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.broker_conf = broker_conf

    @property
    def command(self) -> list[str]:
        cmd = super().command
        assert cmd[-2] == "-c"
        return [*cmd[:-2], "-pm", "local", "-bc", str(self.broker_conf), "-pc", str(self.conf)]


class ApacheProxy(JvmPair):
    """Name server + local-mode proxy JVMs of the reference Apache RocketMQ 5.x (context manager)."""

    name = f"apache-proxy-{REFERENCE_PROXY_VERSION}"
    START_TIMEOUT = 120.0
    STOP_TIMEOUT = 60.0
    BROKER_NAME = "broker-a"

    def __init__(
        self,
        *,
        tls_mode: str = "permissive",
        message_delay_level: str | None = SHORT_DELAY_LEVELS,
        broker_conf: Mapping[str, str] | None = None,
        proxy_conf: Mapping[str, object] | None = None,
        workdir: Path | None = None,
        jvm: Mapping[str, Sequence[str]] = TEST_JVM,
    ) -> None:
        """``broker_conf`` and ``proxy_conf`` are added last to the broker.conf and the proxy's JSON config
        (e.g. ``{"transactionCheckInterval": "1000"}``, ``{"minInvisibleTimeMillsForRecv": 1000}``)."""
        if tls_mode not in TLS_MODES:
            raise ValueError(f"tls_mode is one of {TLS_MODES}, not {tls_mode!r}")
        self.tls_mode = tls_mode
        self.classpath = reference_proxy_classpath()
        super().__init__(workdir, "rmq-reference-proxy-")
        self.port = free_port(also_free=(-2, 1))
        taken = {self.port - 2, self.port, self.port + 1}
        self.namesrv_port, self.grpc_port, self.remoting_port = (self._another_port(taken) for _ in range(3))
        self.home = make_home(self.workdir / "home", {})
        self.admin = ReferenceAdmin(self.workdir, tls=tls_mode == "enforcing")
        self.namesrv_conf = write_properties(
            self.workdir / "namesrv.conf", namesrv_properties(self.namesrv_port, self.workdir / "namesrv")
        )
        self.broker_conf = write_properties(self.workdir / "broker.conf", broker_properties(
            name=self.BROKER_NAME, port=self.port, namesrv=self.namesrv, store=self.workdir / "store",
            message_delay_level=message_delay_level, extra=broker_conf,
        ))  # fmt: skip
        proxy = {
            "rocketMQClusterName": CLUSTER_NAME,
            "namesrvAddr": self.namesrv,
            "proxyMode": "local",
            "grpcServerPort": self.grpc_port,
            "remotingListenPort": self.remoting_port,
            "tlsTestModeEnable": True,
            **(proxy_conf or {}),
        }
        self.proxy_conf = self.workdir / "rmq-proxy.json"
        self.proxy_conf.write_text(json.dumps(proxy, indent=2))
        self.out_path = self.workdir / "processes.out"
        # tls_mode is the proxy JVM's (its gRPC and remoting ports and the embedded broker's); under
        # "enforcing" its own remoting clients (the broker's registration) speak TLS too, which the name
        # server, left at the default "permissive", accepts.
        tls = [f"-Dtls.server.mode={tls_mode}", "-Dtls.test.mode.enable=true"]
        if tls_mode == "enforcing":
            tls.append("-Dtls.enable=true")
        self._namesrv = ReferenceJvm(
            "namesrv", NAMESRV_MAIN, classpath=self.classpath, jvm=[*jvm["namesrv"]], conf=self.namesrv_conf,
            home=self.home, user_home=self.workdir / "namesrv", out_path=self.out_path, ready_line=NAMESRV_BOOT_LINE,
            start_timeout=self.START_TIMEOUT, stop_timeout=self.STOP_TIMEOUT,
        )  # fmt: skip
        self._proxy = _ProxyJvm(
            role="proxy", main_class=PROXY_MAIN, classpath=self.classpath, jvm=[*jvm["broker"], *tls],
            conf=self.proxy_conf, broker_conf=self.broker_conf, home=self.home, user_home=self.workdir,
            out_path=self.out_path, ready_line=PROXY_BOOT_LINE, start_timeout=self.START_TIMEOUT,
            stop_timeout=self.STOP_TIMEOUT,
        )  # fmt: skip
        try:
            self.start()
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _another_port(taken: set[int]) -> int:
        """A free port not in ``taken`` (nothing binds the drawn ports until the JVMs start), added to it."""
        while (port := free_port()) in taken:
            pass
        taken.add(port)
        return port

    @property
    def endpoint(self) -> str:
        """The gRPC endpoint clients are given (``host:port``)."""
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def broker_addr(self) -> str:
        """The embedded broker's remoting address (what the name server's routes name)."""
        return f"127.0.0.1:{self.port}"

    @property
    def remoting_addr(self) -> str:
        """The proxy's own remoting listener (4.x/5.x remoting clients through the proxy)."""
        return f"127.0.0.1:{self.remoting_port}"

    @property
    def proxy_pid(self) -> int:
        return self._proxy.pid

    @property
    def _served(self) -> ReferenceJvm:  # type: ignore[override]
        return self._proxy

    def start(self) -> None:
        """Both JVMs, then wait for the broker's first registration with the name server: 5.3.3 makes it
        by its periodic task, about 10 s after the proxy's boot line, and until then every route lookup
        (so every client start) fails with TOPIC_NOT_FOUND."""
        broker_log = self.logs_dir / "broker.log"
        offset = broker_log.stat().st_size if broker_log.exists() else 0
        super().start()
        assert self._proxy.proc is not None
        try:
            wait_for_line(broker_log, REGISTERED_LINE, self._proxy.proc, self.START_TIMEOUT, offset)
        except ServerError as e:
            self._halt()
            raise ServerError(f"{e}\n--- log tail ---\n{self.log_tail()}") from None

    @property
    def logs_dir(self) -> Path:
        """Where the proxy JVM logs (its ``user.home``); the name server's are under ``namesrv/logs``."""
        return self.workdir / "logs" / "rocketmqlogs"

    @property
    def log_paths(self) -> list[Path]:
        """The JVMs' output, then the proxy JVM's proxy, broker and default logs and the name server's
        (5.x JVMs on one classpath all pick the broker's logback config: ``broker_default.log``)."""
        ns = self.workdir / "namesrv" / "logs" / "rocketmqlogs"
        return [self.out_path, *(self.logs_dir / f"{n}.log" for n in ("proxy", "broker", "broker_default")),
                ns / "broker_default.log"]  # fmt: skip

    def log_tail(self, chars: int = 4000) -> str:
        return tail_logs(self.log_paths, chars, root=self.workdir)

    def mqadmin(self, *args: str) -> str:
        """Run one ``mqadmin`` command (``-n`` is added) and return its output (AdminError if it fails)."""
        return self.admin.mqadmin(*args, namesrv=self.namesrv)

    def create(
        self,
        topics: Mapping[str, str] | Sequence[tuple[str, str, int]] = (),
        groups: Sequence[str | tuple[str, bool, int]] = (),
    ) -> None:
        """``ReferenceAdmin.create`` on this reference."""
        self.admin.create(self.namesrv, self.broker_addr, topics, groups)

    def create_topic(self, name: str, message_type: str = "NORMAL", queues: int = 4) -> None:
        """A topic on the broker with ``queues`` read and write queues and attribute ``message.type``."""
        self.create(topics=[(name, message_type, queues)])

    def create_group(self, name: str, *, orderly: bool = False, retry_max_times: int = 16) -> None:
        """A subscription group with ``consumeMessageOrderly`` (what makes a gRPC consumer FIFO) and
        ``retryMaxTimes`` (deliveries past it go to %DLQ%)."""
        self.create(groups=[(name, orderly, retry_max_times)])

    def __repr__(self) -> str:
        return f"ApacheProxy(endpoint={self.endpoint!r}, namesrv={self.namesrv!r}, workdir={str(self.workdir)!r})"


class ReferenceAdmin:
    """Short admin JVMs of the reference's tools (``Admin``, ``mqadmin``), for any server that
    speaks remoting: the reference proxy's embedded broker, or ``rmqproxy serve``."""

    ADMIN_TIMEOUT = 60.0

    def __init__(self, workdir: Path, *, tls: bool = False) -> None:
        self.workdir = workdir
        self.tls = tls
        self.classpath = reference_proxy_classpath()
        self.home = make_home(workdir / "admin-home", {})

    def _java(self, main: str, args: Sequence[str], what: str) -> str:
        """Run ``main`` of the reference classpath with ``args`` in a short JVM and return its output; raise
        AdminError when it exits non-zero or does not exit within ADMIN_TIMEOUT."""
        cmd = [
            shutil.which("java") or "java", *_ADMIN_JVM,
            f"-Duser.home={self.workdir}", f"-Drocketmq.home.dir={self.home}",
            *(["-Dtls.enable=true"] if self.tls else []),
            "-cp", self.classpath, main, *args,
        ]  # fmt: skip
        env = {**os.environ, "ROCKETMQ_HOME": str(self.home)}
        env.pop("NAMESRV_ADDR", None)
        try:
            proc = subprocess.run(cmd, check=False, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, env=env, timeout=self.ADMIN_TIMEOUT)  # fmt: skip
        except subprocess.TimeoutExpired as e:
            raise AdminError(f"{what} did not exit within {self.ADMIN_TIMEOUT:.0f}s: {e.stdout!r}") from None
        if proc.returncode != 0:
            raise AdminError(f"{what} exited with {proc.returncode}:\n{proc.stdout[-3000:]}")
        return proc.stdout

    def mqadmin(self, *args: str, namesrv: str) -> str:
        """Run one ``mqadmin`` command (``-n namesrv`` is added) and return its output."""
        return self._java(MQADMIN_MAIN, [*args, "-n", namesrv], f"mqadmin {' '.join(args)}")

    def create(
        self,
        namesrv: str,
        broker_addr: str,
        topics: Mapping[str, str] | Sequence[tuple[str, str, int]] = (),
        groups: Sequence[str | tuple[str, bool, int]] = (),
    ) -> None:
        """Make topics ({name: message_type} with 4 queues, or (name, message_type, queues) tuples) and
        groups (names: not orderly, 16 retries; or (name, orderly, retry_max_times) tuples) in one JVM."""
        items = []
        for topic in topics.items() if isinstance(topics, Mapping) else topics:
            name, message_type, queues = (*topic, 4) if len(topic) == 2 else topic
            if message_type not in MESSAGE_TYPES:
                raise ValueError(f"message_type is one of {MESSAGE_TYPES}, not {message_type!r}")
            items.append(f"topic:{name}:{message_type}:{queues}")
        for group in groups:
            name, orderly, retries = (group, False, 16) if isinstance(group, str) else group
            items.append(f"group:{name}:{str(orderly).lower()}:{retries}")
        if items:
            self._java(ADMIN_MAIN, [namesrv, broker_addr, *items], f"Admin {' '.join(items)}")
