"""The reference Apache RocketMQ 4.9.7 name server and broker, for running the scenarios as a baseline.

``RMQ_SCENARIO_TARGET=apache pytest tests/interop/test_scenarios.py`` runs every scenario against
this instead of rmqproxy.  Two JVMs (``NamesrvStartup``, ``BrokerStartup``) from the Maven Central
artifacts (``scenarios/reference-broker/pom.xml``; 4.9.7 is the newest 4.9.x broker published),
on loopback, with a temporary ``ROCKETMQ_HOME`` (logback configs writing to files), store and
``user.home``.  The broker listens on ``port`` and, as the reference always does, also binds
``port - 2`` (VIP channel) and ``port + 1`` (HA).  Same interface as ``server.RunningServer``:
``namesrv``, ``restart()`` (both processes, same ports and store), ``stop()``, ``log_tail()``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

from .maven import build_classpath
from .server import SHORT_DELAY_LEVELS, ScratchServer, ServerError, free_port, wait_for_line

__all__ = ["REFERENCE_VERSION", "ApacheBroker"]

REFERENCE_VERSION = os.environ.get("RMQ_REFERENCE_BROKER_VERSION", "4.9.7")
PROJECT = Path(__file__).resolve().parent / "scenarios" / "reference-broker"
#: The 5.x broker, for what 4.9.x lacks (timer messages). Its name server is not published to
#: Maven Central, so it registers with the 4.9.7 name server.
REFERENCE_5_VERSION = "5.3.1"
PROJECT_5 = Path(__file__).resolve().parent / "scenarios" / "reference-broker5"

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


class ApacheBroker(ScratchServer):
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
        self.classpath = build_classpath(PROJECT, REFERENCE_VERSION)
        self.broker_classpath = build_classpath(PROJECT_5, REFERENCE_5_VERSION) if broker_5 else self.classpath
        if broker_5:
            self.name = f"apache-{REFERENCE_5_VERSION}"
        self.jvm = jvm  # heap, collector and compiler flags per role (TEST_JVM or SCRIPT_JVM)
        super().__init__(workdir, "rmq-reference-")
        self.namesrv_port = free_port()
        self.port = free_port(also_free=(-2, 1))
        home = self.workdir / "home"
        (home / "conf").mkdir(parents=True, exist_ok=True)
        for role in ("namesrv", "broker"):
            (home / "conf" / f"logback_{role}.xml").write_text(_LOGBACK.format(file=self.workdir / f"{role}.log"))
        self.home = home
        self.namesrv_conf = self.workdir / "namesrv.conf"
        self.namesrv_conf.write_text(
            f"listenPort={self.namesrv_port}\n"
            f"kvConfigPath={self.workdir / 'namesrv' / 'kvConfig.json'}\n"
        )
        store = self.workdir / "store"
        conf = {
            "brokerClusterName": "DefaultCluster",
            "brokerName": self.BROKER_NAME,
            "brokerId": "0",
            "brokerRole": "ASYNC_MASTER",
            "flushDiskType": "ASYNC_FLUSH",
            "brokerIP1": "127.0.0.1",
            "listenPort": str(self.port),
            "namesrvAddr": self.namesrv,
            "storePathRootDir": str(store),
            "storePathCommitLog": str(store / "commitlog"),
            "mappedFileSizeCommitLog": str(64 * 1024 * 1024),
            "autoCreateTopicEnable": "true",
            "autoCreateSubscriptionGroup": "true",
        }
        if message_delay_level:
            conf["messageDelayLevel"] = message_delay_level
        conf.update(broker_conf or {})
        self.broker_conf = self.workdir / "broker.conf"
        self.broker_conf.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
        self.out_path = self.workdir / "processes.out"
        self._namesrv: subprocess.Popen[bytes] | None = None
        self._broker: subprocess.Popen[bytes] | None = None
        try:
            self.start()
        except BaseException:
            self.close()
            raise

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def broker_pid(self) -> int:
        """The broker JVM's process id (for CPU and memory figures)."""
        if self._broker is None:
            raise ServerError("the broker is not running")
        return self._broker.pid

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _spawn(self, role: str, main_class: str, conf: Path, needle: str) -> subprocess.Popen[bytes]:
        cmd = [
            shutil.which("java") or "java", *self.jvm[role], *_JVM_FLAGS,
            f"-Duser.home={self.workdir}",
            f"-Drocketmq.home.dir={self.home}",
            "-cp", self.broker_classpath if role == "broker" else self.classpath, main_class, "-c", str(conf),
        ]
        env = {**os.environ, "ROCKETMQ_HOME": str(self.home)}
        env.pop("ROCKETMQ_SERIALIZE_TYPE", None)
        env.pop("NAMESRV_ADDR", None)
        offset = self.out_path.stat().st_size if self.out_path.exists() else 0
        with open(self.out_path, "ab") as out:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            wait_for_line(self.out_path, needle, proc, self.START_TIMEOUT, offset)
        except ServerError as e:
            self._terminate(proc)
            raise ServerError(f"{e}\n--- log tail ---\n{self.log_tail()}") from None
        return proc

    def start(self) -> None:
        self._namesrv = self._spawn(
            "namesrv", "org.apache.rocketmq.namesrv.NamesrvStartup", self.namesrv_conf, "The Name Server boot success"
        )
        self._broker = self._spawn(
            "broker", "org.apache.rocketmq.broker.BrokerStartup", self.broker_conf, f"{self.broker_addr}] boot success"
        )

    def _terminate(self, proc: subprocess.Popen[bytes] | None) -> None:
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)  # both run their shutdown hooks (broker: unregister, flush)
        try:
            proc.wait(timeout=self.STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise ServerError(f"{proc.args[-3]} did not exit within {self.STOP_TIMEOUT:.0f}s of SIGTERM") from None

    def stop(self) -> None:
        try:
            self._terminate(self._broker)
        finally:
            self._terminate(self._namesrv)

    def restart(self) -> None:
        self.stop()
        self.start()

    def kill(self) -> None:
        """SIGKILL both JVMs, as a crash would stop them (``start()`` brings them back on the same store)."""
        self._halt()

    def alive(self) -> bool:
        return all(p is not None and p.poll() is None for p in (self._namesrv, self._broker))

    def log_tail(self, chars: int = 4000) -> str:
        parts = []
        for path in (self.out_path, self.workdir / "broker.log"):
            try:
                parts.append(f"--- {path.name} ---\n" + path.read_text(errors="replace")[-chars:])
            except OSError:
                pass
        return "\n".join(parts) or "(no log)"

    def _halt(self) -> None:
        """Kill both JVMs (the store is thrown away, so their 10 s graceful shutdown buys nothing)."""
        for proc in (self._broker, self._namesrv):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()

    def __repr__(self) -> str:
        return f"ApacheBroker(namesrv={self.namesrv!r}, broker={self.broker_addr!r}, workdir={str(self.workdir)!r})"
