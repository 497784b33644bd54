"""The reference Apache RocketMQ 4.9.7 name server and broker, for running the scenarios as a baseline.

``RMQ_SCENARIO_TARGET=apache pytest tests/interop/test_scenarios.py`` runs every scenario against
this instead of rmqproxy.  Two JVMs (``NamesrvStartup``, ``BrokerStartup``) from the Maven Central
artifacts (``scenarios/reference-broker/pom.xml``; 4.9.7 is the newest 4.9.x broker published),
on loopback, with a temporary ``ROCKETMQ_HOME`` (logback configs writing to files), store and
``user.home``.  The broker listens on ``port`` and, as the reference always does, also binds
``port - 2`` (VIP channel) and ``port + 1`` (HA).  Same interface as ``server.RunningServer``:
``namesrv``, ``restart()`` (both processes, same ports and store), ``stop()``, ``log_tail()``.

The pieces are shared with ``apache_cluster.ApacheCluster`` (one name server, several brokers):
``ReferenceJvm`` (one JVM: spawn, wait for its boot line, SIGTERM or SIGKILL), ``make_home`` (a
``ROCKETMQ_HOME`` with logback configs and, for ACL, ``conf/plain_acl.yml``), ``namesrv_properties``
and ``broker_properties`` (the conf files), ``tail_logs``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from .maven import build_classpath
from .server import SHORT_DELAY_LEVELS, ScratchServer, ServerError, free_port, kill_amid_requests, wait_for_line

__all__ = [
    "REFERENCE_VERSION",
    "REFERENCE_5_VERSION",
    "ApacheBroker",
    "JvmPair",
    "ReferenceJvm",
    "broker_properties",
    "make_home",
    "namesrv_properties",
    "plain_acl_yaml",
    "reference_classpaths",
    "tail_logs",
    "write_properties",
]

REFERENCE_VERSION = os.environ.get("RMQ_REFERENCE_BROKER_VERSION", "4.9.7")
PROJECT = Path(__file__).resolve().parent / "scenarios" / "reference-broker"
#: The 5.x broker, for what 4.9.x lacks (timer messages). Its name server is not published to
#: Maven Central, so it registers with the 4.9.7 name server.
REFERENCE_5_VERSION = "5.3.1"
PROJECT_5 = Path(__file__).resolve().parent / "scenarios" / "reference-broker5"

NAMESRV_MAIN = "org.apache.rocketmq.namesrv.NamesrvStartup"
BROKER_MAIN = "org.apache.rocketmq.broker.BrokerStartup"
NAMESRV_BOOT_LINE = "The Name Server boot success"
CLUSTER_NAME = "DefaultCluster"

_LOGBACK = """<?xml version="1.0" encoding="UTF-8"?>
<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{file}</file>
    <append>true</append>
    <encoder><pattern>%d{{HH:mm:ss.SSS}} %-5p [%t] %c{{0}} - %m%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
"""

#: Small and quick to start, for tests: a small heap, the serial collector, and C1 only.
TEST_JVM = {
    role: ["-Xms256m", "-Xmx768m", "-XX:MaxDirectMemorySize=512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
           "-Xshare:auto"]
    for role in ("namesrv", "broker")
}  # fmt: skip
#: What the reference's own start scripts give each JVM (4.9.x ``runserver.sh`` and
#: ``runbroker.sh`` on Java 9+), for benchmarks that compare against it fairly.
SCRIPT_JVM = {
    "namesrv": ["-server", "-Xms4g", "-Xmx4g", "-XX:MetaspaceSize=128m", "-XX:MaxMetaspaceSize=320m",
                "-XX:+UseG1GC", "-XX:G1HeapRegionSize=16m", "-XX:G1ReservePercent=25",
                "-XX:InitiatingHeapOccupancyPercent=30", "-XX:SoftRefLRUPolicyMSPerMB=0",
                "-XX:-OmitStackTraceInFastThrow", "-XX:-UseLargePages"],
    "broker": ["-server", "-Xms8g", "-Xmx8g", "-XX:+UseG1GC", "-XX:G1HeapRegionSize=16m", "-XX:G1ReservePercent=25",
               "-XX:InitiatingHeapOccupancyPercent=30", "-XX:SoftRefLRUPolicyMSPerMB=0",
               "-XX:-OmitStackTraceInFastThrow", "-XX:+AlwaysPreTouch", "-XX:MaxDirectMemorySize=15g",
               "-XX:-UseLargePages"],
}  # fmt: skip

_JVM_FLAGS = [
    # 4.9.x unmaps files reflectively (DirectBuffer.cleaner().clean()); without these a restart on
    # an existing store fails in IndexService.load with InaccessibleObjectException on Java 17
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED",
    "-Dfile.encoding=UTF-8",
]


def reference_classpaths(broker_5: bool) -> tuple[str, str]:
    """(name server classpath, broker classpath): 4.9.7 for both, or the 5.3.1 broker's (built with
    Maven on first use)."""
    classpath = build_classpath(PROJECT, REFERENCE_VERSION)
    return classpath, build_classpath(PROJECT_5, REFERENCE_5_VERSION) if broker_5 else classpath


def broker_boot_line(addr: str) -> str:
    """What a broker (4.9.x and 5.x) prints once started: ``The broker[NAME, ADDR] boot success...``."""
    return f"{addr}] boot success"


def write_properties(path: Path, conf: Mapping[str, str]) -> Path:
    """``conf`` as a Java properties file at ``path`` (``-c`` of both startups)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
    return path


def plain_acl_yaml(access_key: str, secret_key: str) -> str:
    """A ``plain_acl.yml`` with one account of admin rights (PUB|SUB on every topic and group) and
    no white-listed address: every request to the broker must be signed with this account."""
    for what, key in (("accessKey", access_key), ("secretKey", secret_key)):
        if len(key) <= 6:  # AclConstants.ACCESS_KEY_MIN_LENGTH / SECRET_KEY_MIN_LENGTH: the broker refuses the file
            raise ValueError(f"the reference broker wants an ACL {what} longer than 6 characters, not {key!r}")
    return (
        "accounts:\n"
        f"  - accessKey: {json.dumps(access_key)}\n"
        f"    secretKey: {json.dumps(secret_key)}\n"
        "    admin: true\n"
        "    defaultTopicPerm: PUB|SUB\n"
        "    defaultGroupPerm: PUB|SUB\n"
    )


def make_home(home: Path, logs: Mapping[str, Path], acl: Mapping[str, str] | None = None) -> Path:
    """A ``ROCKETMQ_HOME`` at ``home``: ``conf/logback_<role>.xml`` writing each role's log to
    ``logs[role]`` (the 4.9.x startups read them; 5.x logs under ``user.home`` instead) and, with
    ``acl`` ({"accessKey", "secretKey"}), ``conf/plain_acl.yml``: both lines read
    ``${rocketmq.home.dir}/conf/plain_acl.yml`` (``PlainPermissionManager``, plus any ``*.yml``
    under ``conf/acl/``) and watch it, and a broker creates it empty when it is missing."""
    (home / "conf").mkdir(parents=True, exist_ok=True)
    for role, log in logs.items():
        (home / "conf" / f"logback_{role}.xml").write_text(_LOGBACK.format(file=log))
    if acl is not None:
        (home / "conf" / "plain_acl.yml").write_text(plain_acl_yaml(acl["accessKey"], acl["secretKey"]))
    return home


def namesrv_properties(port: int, kv_dir: Path) -> dict[str, str]:
    return {"listenPort": str(port), "kvConfigPath": str(kv_dir / "kvConfig.json")}


def broker_properties(
    *,
    name: str,
    port: int,
    namesrv: str,
    store: Path,
    message_delay_level: str | None = SHORT_DELAY_LEVELS,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The conf of a master (brokerId 0) of ``DefaultCluster`` on 127.0.0.1:``port`` with its store
    in ``store``; ``extra`` last, so it overrides any of these."""
    conf = {
        "brokerClusterName": CLUSTER_NAME,
        "brokerName": name,
        "brokerId": "0",
        "brokerRole": "ASYNC_MASTER",
        "flushDiskType": "ASYNC_FLUSH",
        "brokerIP1": "127.0.0.1",
        "listenPort": str(port),
        "namesrvAddr": namesrv,
        "storePathRootDir": str(store),
        "storePathCommitLog": str(store / "commitlog"),
        "mappedFileSizeCommitLog": str(64 * 1024 * 1024),
        "autoCreateTopicEnable": "true",
        "autoCreateSubscriptionGroup": "true",
    }
    if message_delay_level:
        conf["messageDelayLevel"] = message_delay_level
    conf.update(extra or {})
    return conf


def tail_logs(paths: Iterable[Path], chars: int, root: Path | None = None) -> str:
    """The last ``chars`` of each file that exists, under a ``--- name ---`` line (the path
    relative to ``root`` when given, else the file name)."""
    parts = []
    for path in paths:
        try:
            text = path.read_text(errors="replace")[-chars:]
        except OSError:
            continue
        label = path.relative_to(root) if root is not None and path.is_relative_to(root) else path.name
        parts.append(f"--- {label} ---\n{text}")
    return "\n".join(parts) or "(no log)"


class ReferenceJvm:
    """One JVM of the reference (a name server or a broker), started again and again on the same
    conf: output (stdout and stderr) appended to ``out_path``, ready once ``ready_line`` appears
    there. ``spawn()`` then ``wait_ready()`` let several start at once; ``start()`` does both."""

    def __init__(
        self,
        role: str,
        main_class: str,
        *,
        classpath: str,
        jvm: Sequence[str],
        conf: Path,
        home: Path,
        user_home: Path,
        out_path: Path,
        ready_line: str,
        log_path: Path | None = None,
        start_timeout: float = 90.0,
        stop_timeout: float = 60.0,
    ) -> None:
        self.role = role
        self.main_class = main_class
        self.classpath = classpath
        self.jvm = list(jvm)
        self.conf = conf
        self.home = home
        self.user_home = user_home
        self.out_path = out_path
        self.ready_line = ready_line
        self.log_path = log_path
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self._offset = 0

    @property
    def command(self) -> list[str]:
        return [
            shutil.which("java") or "java", *self.jvm, *_JVM_FLAGS,
            f"-Duser.home={self.user_home}",
            f"-Drocketmq.home.dir={self.home}",
            "-cp", self.classpath, self.main_class, "-c", str(self.conf),
        ]  # fmt: skip

    @property
    def pid(self) -> int:
        if not self.alive():
            raise ServerError(f"the {self.role} is not running")
        assert self.proc is not None
        return self.proc.pid

    @property
    def log_paths(self) -> list[Path]:
        """Where it writes: its output, then its log: ``log_path`` (4.9.x, where ``make_home``'s
        logback config puts it) or, for a 5.x broker, ``user.home/logs/rocketmqlogs/<role>.log``
        (5.x ignores ``conf/logback_*.xml``). ``tail_logs`` skips those not written."""
        paths = [self.out_path]
        if self.log_path is not None:
            paths.append(self.log_path)
        return [*paths, self.user_home / "logs" / "rocketmqlogs" / f"{self.role}.log"]

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def spawn(self) -> None:
        if self.alive():
            raise ServerError(f"the {self.role} is already running")
        env = {**os.environ, "ROCKETMQ_HOME": str(self.home)}
        env.pop("ROCKETMQ_SERIALIZE_TYPE", None)
        env.pop("NAMESRV_ADDR", None)
        self.out_path.parent.mkdir(parents=True, exist_ok=True)
        self._offset = self.out_path.stat().st_size if self.out_path.exists() else 0
        with open(self.out_path, "ab") as out:
            self.proc = subprocess.Popen(
                self.command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env
            )

    def wait_ready(self) -> None:
        """Wait for the ready line printed since ``spawn()``; on failure kill the JVM and raise."""
        assert self.proc is not None, "spawn() first"
        try:
            wait_for_line(self.out_path, self.ready_line, self.proc, self.start_timeout, self._offset)
        except ServerError:
            self.kill()
            raise

    def start(self) -> None:
        self.spawn()
        self.wait_ready()

    def signal_stop(self) -> None:
        """SIGTERM: both roles run their shutdown hooks (broker: unregister, flush)."""
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGTERM)

    def wait_stopped(self) -> None:
        """Wait for the exit after ``signal_stop()``; SIGKILL and raise past ``stop_timeout``."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            self.proc.wait(timeout=self.stop_timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise ServerError(f"{self.main_class} did not exit within {self.stop_timeout:.0f}s of SIGTERM") from None

    def terminate(self) -> None:
        self.signal_stop()
        self.wait_stopped()

    def kill(self) -> None:
        """SIGKILL, as a crash would stop it (``start()`` brings it back on the same conf and store)."""
        if self.alive():
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait()


class JvmPair(ScratchServer):
    """A reference name server JVM (``_namesrv``) and the JVM it serves (``_served``: a broker, or a
    proxy with its broker), started, stopped and killed together."""

    _namesrv: ReferenceJvm
    _served: ReferenceJvm

    def _start(self, jvm: ReferenceJvm) -> None:
        try:
            jvm.start()
        except ServerError as e:
            raise ServerError(f"{e}\n--- log tail ---\n{self.log_tail()}") from None

    def start(self) -> None:
        self._start(self._namesrv)
        self._start(self._served)

    def stop(self) -> None:
        try:
            self._served.terminate()
        finally:
            self._namesrv.terminate()

    def restart(self) -> None:
        self.stop()
        self.start()

    def kill(self) -> None:
        """SIGKILL both JVMs, as a crash would stop them (``start()`` brings them back on the same store)."""
        self._halt()

    def crash(self) -> None:
        """SIGKILL both JVMs amid clients' requests to the broker (``server.kill_amid_requests``;
        ``start()`` brings them back on the same store)."""
        port = int(self.broker_addr.rsplit(":", 1)[1])
        kill_amid_requests([self._served.pid, self._namesrv.pid], {port}, self._halt)

    def alive(self) -> bool:
        return self._namesrv.alive() and self._served.alive()

    def log_tail(self, chars: int = 4000) -> str:
        raise NotImplementedError

    def _halt(self) -> None:
        """Kill both JVMs (the store is thrown away, so a graceful shutdown buys nothing)."""
        self._served.kill()
        self._namesrv.kill()


class ApacheBroker(JvmPair):
    """Name server + broker JVMs of the reference Apache RocketMQ (context manager)."""

    name = f"apache-{REFERENCE_VERSION}"
    START_TIMEOUT = 90.0
    STOP_TIMEOUT = 60.0
    BROKER_NAME = "broker-a"

    def __init__(
        self,
        *,
        message_delay_level: str | None = SHORT_DELAY_LEVELS,
        broker_conf: dict[str, str] | None = None,
        workdir: Path | None = None,
        jvm: dict[str, list[str]] = TEST_JVM,
        broker_5: bool = False,
    ) -> None:
        self.classpath, self.broker_classpath = reference_classpaths(broker_5)
        if broker_5:
            self.name = f"apache-{REFERENCE_5_VERSION}"
        self.jvm = jvm  # heap, collector and compiler flags per role (TEST_JVM or SCRIPT_JVM)
        super().__init__(workdir, "rmq-reference-")
        self.namesrv_port = free_port()
        self.port = free_port(also_free=(-2, 1))
        logs = {role: self.workdir / f"{role}.log" for role in ("namesrv", "broker")}
        self.home = make_home(self.workdir / "home", logs)
        self.namesrv_conf = write_properties(
            self.workdir / "namesrv.conf", namesrv_properties(self.namesrv_port, self.workdir / "namesrv")
        )
        conf = broker_properties(
            name=self.BROKER_NAME, port=self.port, namesrv=self.namesrv, store=self.workdir / "store",
            message_delay_level=message_delay_level, extra=broker_conf,
        )  # fmt: skip
        self.broker_conf = write_properties(self.workdir / "broker.conf", conf)
        self.out_path = self.workdir / "processes.out"
        self._namesrv = self._jvm("namesrv", NAMESRV_MAIN, self.classpath, self.namesrv_conf, NAMESRV_BOOT_LINE, logs)
        self._broker = self._jvm(
            "broker", BROKER_MAIN, self.broker_classpath, self.broker_conf, broker_boot_line(self.broker_addr), logs
        )
        try:
            self.start()
        except BaseException:
            self.close()
            raise

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def namesrv_addr(self) -> str:
        """Every name server in Java's ``namesrvAddr`` syntax, as ``ApacheCluster`` has it: the one."""
        return self.namesrv

    @property
    def broker_pid(self) -> int:
        """The broker JVM's process id (for CPU and memory figures)."""
        return self._broker.pid

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _jvm(self, role: str, main: str, classpath: str, conf: Path, ready: str, logs: dict[str, Path]) -> ReferenceJvm:
        """Both share ``home``, ``user.home`` (the workdir) and the output file ``processes.out``."""
        return ReferenceJvm(
            role, main, classpath=classpath, jvm=self.jvm[role], conf=conf, home=self.home, user_home=self.workdir,
            out_path=self.out_path, ready_line=ready, log_path=logs[role], start_timeout=self.START_TIMEOUT,
            stop_timeout=self.STOP_TIMEOUT,
        )  # fmt: skip

    @property
    def _served(self) -> ReferenceJvm:  # type: ignore[override]
        return self._broker

    def log_tail(self, chars: int = 4000) -> str:
        return tail_logs(self._broker.log_paths, chars)

    def __repr__(self) -> str:
        return f"ApacheBroker(namesrv={self.namesrv!r}, broker={self.broker_addr!r}, workdir={str(self.workdir)!r})"
