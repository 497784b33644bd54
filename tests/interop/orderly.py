"""Orderly-consumption scenarios with real Java clients (issue 8), shared by test_orderly.py and
bench/locks.py.

Every consumer is its own JVM (``java/OrderlyConsumer.java``), so a kill -9 is a real process
death; the producer is ``java/OrderlyProducer.java`` (sync sends; the selector sorts the topic's
queues by (broker name, queue id) and takes the (order id % queue count)-th: on one broker with 8
queues, queue id = order id % 8).
Both programs are compiled once per client line with ``javac`` (``compile_programs``) because the
scenarios start JVMs dozens of times. Consumers append one line per consumed message to their own
log (format in OrderlyConsumer.java); ``read_log`` parses it, ``check_group`` looks for ordering,
exclusivity and completeness violations; ``run_ordering`` is the churn scenario and
``run_handoffs`` measures how long a departed consumer's queues wait for the survivor.

A topic may have its queues on several brokers (``brokers=2``: ``queues`` queues created on each
master, as behind ``rmqproxy proxy`` in front of an Apache cluster). Queue ids then repeat per
broker, so a queue is a (broker name, queue id) pair everywhere here (``Consumed.key``); the
producer's READY line lists the topic's queues in its selector's order (``Layout``).

All timestamps are wall-clock (CLOCK_REALTIME) readings on this machine, from the JVMs
(``Instant.now()``, microseconds) and from Python (``time.time()`` at the moment of a kill).
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
import signal
import subprocess
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

from codec.bodies import TopicRouteData
from codec.codes import RequestCode

from .oracle import ORACLE_LINES, build_classpath
from .wire import WireClient

JAVA_DIR = Path(__file__).resolve().parent / "java"
PROGRAMS = ("OrderlyConsumer.java", "OrderlyProducer.java")
#: Fast-starting JVMs (as the oracle uses); the client's own settings are left at their defaults.
JVM_FLAGS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto", "-Xmx256m", "-Dfile.encoding=UTF-8"]


class ScenarioError(RuntimeError):
    """A Java program failed or did not reach the expected state in time."""


def now_us() -> int:
    return time.time_ns() // 1000


def compile_programs(line: str, dest: Path) -> str:
    """javac the scenario programs for a client line into ``dest``; return the run classpath."""
    classpath = build_classpath(line)
    dest.mkdir(parents=True, exist_ok=True)
    javac = shutil.which("javac") or "javac"
    proc = subprocess.run(
        [javac, "-nowarn", "-d", str(dest), "-cp", classpath, *(str(JAVA_DIR / p) for p in PROGRAMS)],
        check=False, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if proc.returncode != 0:
        raise ScenarioError(f"javac failed for {ORACLE_LINES.get(line, line)}:\n{proc.stderr[-3000:]}")
    return os.pathsep.join([str(dest), classpath])


def _wait_for(path: Path, needle: str, proc: subprocess.Popen, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while True:
        text = path.read_text(errors="replace") if path.exists() else ""
        for line in text.splitlines():
            if line.startswith(needle):
                return line
        if proc.poll() is not None:
            raise ScenarioError(f"{proc.args[-6:]!r} exited {proc.returncode} before {needle!r}:\n{text[-3000:]}")
        if time.monotonic() > deadline:
            raise ScenarioError(f"{proc.args[-6:]!r} printed no {needle!r} within {timeout:.0f}s:\n{text[-3000:]}")
        time.sleep(0.05)


class JavaProgram:
    """One JVM running a scenario program; stdout+stderr go to ``<workdir>/<name>.out``."""

    def __init__(self, classpath: str, main: str, args: list[str], workdir: Path, name: str) -> None:
        self.name = name
        self.out_path = workdir / f"{name}.out"
        log_root = workdir / "client-logs" / name
        log_root.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.pop("ROCKETMQ_SERIALIZE_TYPE", None)
        cmd = [
            shutil.which("java") or "java", *JVM_FLAGS,
            f"-Drocketmq.client.logRoot={log_root}", f"-Drocketmq.log.root={log_root}",
            "-cp", classpath, main, *args,
        ]  # fmt: skip
        with open(self.out_path, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT, env=env)

    def wait_for(self, needle: str, timeout: float = 60.0) -> str:
        return _wait_for(self.out_path, needle, self.proc, timeout)

    def tell(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def close_stdin(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass

    def kill(self) -> int:
        """SIGKILL now; return the kill time (epoch µs, taken just before the signal)."""
        t = now_us()
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.close_stdin()
        return t

    def alive(self) -> bool:
        return self.proc.poll() is None

    def output(self) -> str:
        return self.out_path.read_text(errors="replace") if self.out_path.exists() else ""

    def ensure_dead(self) -> None:
        if self.alive():
            self.proc.kill()
            self.proc.wait()
        self.close_stdin()


class Consumer(JavaProgram):
    """OrderlyConsumer in its own JVM; ``session`` names this process's lifetime in the logs."""

    def __init__(self, classpath: str, namesrv: str, topic: str, group: str, session: str, workdir: Path,
                 consume_us: int = 0, allocate: str = "") -> None:  # fmt: skip
        """``allocate="circle"``: AllocateMessageQueueAveragelyByCircle (each consumer gets queues of
        every broker), else the client's default."""
        self.session = session
        self.log_path = workdir / f"{session}.log"
        args = [namesrv, topic, group, session, str(self.log_path), str(consume_us), allocate]
        super().__init__(classpath, "OrderlyConsumer", args, workdir, session)

    def wait_started(self, timeout: float = 60.0) -> str:
        return self.wait_for("STARTED", timeout).split()[1]

    def stop(self, timeout: float = 60.0) -> None:
        """Ask for a clean shutdown and wait for the JVM to exit 0."""
        try:
            self.tell("stop")
        except BrokenPipeError:
            pass
        self.close_stdin()
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.ensure_dead()
            raise ScenarioError(f"{self.session} did not stop within {timeout:.0f}s:\n{self.output()[-3000:]}") from None
        if rc != 0:
            raise ScenarioError(f"{self.session} exited {rc} on stop:\n{self.output()[-3000:]}")


class Producer(JavaProgram):
    """``queues`` is per broker: the topic is created with that many on each master and READY
    waits until the route shows them on ``brokers`` brokers."""

    def __init__(self, classpath: str, namesrv: str, topic: str, workdir: Path, *, queues: int = 8,
                 orders: int = 1000, total: int = 0, rate: float = 0.0, threads: int = 1,
                 brokers: int = 1) -> None:  # fmt: skip
        args = [namesrv, topic, str(queues), str(orders), str(total), str(rate), str(threads), str(brokers)]
        super().__init__(classpath, "OrderlyProducer", args, workdir, "producer")

    def layout(self, timeout: float = 60.0) -> Layout:
        """The topic's queues in the selector's order, from the READY line (waits for it)."""
        fields = self.wait_for("READY", timeout).split()[1:]
        return [(broker, int(queue)) for broker, queue in (f.rsplit("/", 1) for f in fields)]

    def go(self) -> None:
        self.wait_for("READY")
        self.tell("go")

    def finish(self, timeout: float) -> dict:
        """Wait for the RESULT line (after ``stop`` or when all is sent) and the exit."""
        line = self.wait_for("RESULT ", timeout)
        self.proc.wait(timeout=30)
        self.close_stdin()
        return json.loads(line[len("RESULT "):])

    def stop(self, timeout: float = 60.0) -> dict:
        try:
            self.tell("stop")
        except BrokenPipeError:
            pass
        return self.finish(timeout)


# --- logs -------------------------------------------------------------------------------------


#: A topic's queues as (broker name, queue id), in the producer's selector order: order id o goes
#: to ``layout[o % len(layout)]``.
Layout = list[tuple[str, int]]


@dataclasses.dataclass(frozen=True, slots=True)
class Consumed:
    session: str
    queue: int
    order: int
    seq: int
    born_ms: int
    start_us: int
    end_us: int
    broker: str = ""  # "" in logs of consumers that did not write it

    @property
    def key(self) -> tuple[str, int]:
        """The queue: its id alone is not one when the topic has queues on several brokers."""
        return (self.broker, self.queue)


@dataclasses.dataclass
class ConsumerLog:
    records: list[Consumed] = dataclasses.field(default_factory=list)
    pid: dict[str, int] = dataclasses.field(default_factory=dict)  # session -> pid
    client_id: dict[str, str] = dataclasses.field(default_factory=dict)
    started_us: dict[str, int] = dataclasses.field(default_factory=dict)
    shutdown_begin_us: dict[str, int] = dataclasses.field(default_factory=dict)
    shutdown_end_us: dict[str, int] = dataclasses.field(default_factory=dict)


def read_log(paths: Iterable[Path], into: ConsumerLog | None = None) -> ConsumerLog:
    """Parse consumer logs. Lines go out whole, so even a kill -9 leaves none torn; a last line
    without its newline is a write still in progress while a scenario polls, and is skipped."""
    out = into or ConsumerLog()
    for path in paths:
        if not path.exists():
            continue
        for line in path.read_text().split("\n")[:-1]:
            f = line.split()
            if not f:
                continue
            if f[0] == "M":
                out.records.append(Consumed(f[1], int(f[2]), int(f[3]), int(f[4]), int(f[5]), int(f[6]), int(f[7]),
                                            f[8] if len(f) > 8 else ""))  # fmt: skip
            elif f[0] == "S":
                out.pid[f[1]] = int(f[2])
                out.client_id[f[1]] = f[3]
                out.started_us[f[1]] = int(f[4])
            elif f[0] == "B":
                out.shutdown_begin_us[f[1]] = int(f[2])
            elif f[0] == "E":
                out.shutdown_end_us[f[1]] = int(f[2])
    return out


@dataclasses.dataclass
class GroupCheck:
    consumed: int  # lines, duplicates included
    distinct: int
    duplicates: int
    missing: list[tuple[int, int]]  # (order, seq) never consumed
    unexpected: list[tuple[int, int]]  # (order, seq) consumed but never meant to be sent
    wrong_queue: list[Consumed]  # order id consumed from a queue other than its own (order % queues)
    decreasing: list[tuple[str, int, int, int]]  # (session, order, previous seq, seq)
    first_out_of_order: list[tuple[int, int]]  # (order, seq): first consumed before seq - 1 was
    # (queue, record, other session, other's end_us); the queue is its id, or with a layout its
    # (broker, queue id)
    overlaps: list[tuple[int | tuple[str, int], Consumed, str, int]]

    @property
    def violations(self) -> int:
        return sum(map(len, (self.missing, self.unexpected, self.wrong_queue, self.decreasing,
                             self.first_out_of_order, self.overlaps)))

    def summary(self) -> dict:
        return {
            "consumed": self.consumed, "distinct": self.distinct, "duplicates": self.duplicates,
            "missing": len(self.missing), "unexpected": len(self.unexpected), "wrong_queue": len(self.wrong_queue),
            "decreasing": len(self.decreasing), "first_out_of_order": len(self.first_out_of_order),
            "overlaps": len(self.overlaps),
            "examples": {
                "missing": self.missing[:5], "decreasing": self.decreasing[:5],
                "first_out_of_order": self.first_out_of_order[:5],
                "overlaps": [(q, dataclasses.astuple(r), s, e) for q, r, s, e in self.overlaps[:5]],
                "wrong_queue": [dataclasses.astuple(r) for r in self.wrong_queue[:5]],
            },
        }  # fmt: skip


def check_group(records: list[Consumed], *, orders: int, per_order: int, queues: int = 8,
                layout: Layout | None = None) -> GroupCheck:  # fmt: skip
    """Issue 8's checks over the merged logs of every consumer session of one group.

    Queues are told apart by id (one broker, ``queues`` of them, order o on queue o % queues), or
    with ``layout`` (the producer's, ``Producer.layout``) by (broker, queue id), order o on
    ``layout[o % len(layout)]``; a record of a queue the layout lacks is a wrong queue.

    (a) per order id, within one consumer session, seq never decreases (log order per order id is
        consumption order: a queue is consumed by one thread at a time and lines are written inside
        the listener); (b) no two sessions (processes) have overlapping consume intervals on one
        queue (touching ends allowed); (c) every (order, seq) for seq < per_order consumed at least
        once (duplicates allowed: orderly consumption is at least once after a crash). Also, over
        the whole group, no seq is consumed for the first time before the seq before it.
    """
    last_seq: dict[tuple[str, int], int] = {}
    decreasing = []
    first_us: dict[tuple[int, int], int] = {}
    seen: dict[tuple[int, int], int] = defaultdict(int)
    wrong_queue = []
    for r in records:
        key = (r.session, r.order)
        prev = last_seq.get(key)
        if prev is not None and r.seq < prev:
            decreasing.append((r.session, r.order, prev, r.seq))
        last_seq[key] = r.seq
        seen[(r.order, r.seq)] += 1
        if r.start_us < first_us.get((r.order, r.seq), 1 << 62):
            first_us[(r.order, r.seq)] = r.start_us
        if (r.order % queues != r.queue) if layout is None else (layout[r.order % len(layout)] != r.key):
            wrong_queue.append(r)
    overlaps = []
    by_queue: dict[int | tuple[str, int], list[Consumed]] = defaultdict(list)
    for r in records:
        by_queue[r.queue if layout is None else r.key].append(r)
    for queue, recs in by_queue.items():
        recs.sort(key=lambda r: (r.start_us, r.end_us))
        max_end: dict[str, int] = {}  # session -> latest end so far
        for r in recs:
            for session, end in max_end.items():
                if session != r.session and r.start_us < end:
                    overlaps.append((queue, r, session, end))
            if r.end_us > max_end.get(r.session, -1):
                max_end[r.session] = r.end_us
    first_out_of_order = sorted(
        (o, s) for (o, s), t in first_us.items() if s > 0 and (o, s - 1) in first_us and t < first_us[(o, s - 1)]
    )
    expected = {(o, s) for o in range(orders) for s in range(per_order)}
    missing = sorted(expected - seen.keys())
    unexpected = sorted(seen.keys() - expected)
    return GroupCheck(
        consumed=len(records), distinct=len(seen), duplicates=len(records) - len(seen), missing=missing,
        unexpected=unexpected, wrong_queue=wrong_queue, decreasing=decreasing,
        first_out_of_order=first_out_of_order, overlaps=overlaps,
    )  # fmt: skip


# --- handoff ----------------------------------------------------------------------------------


def queues_of(records: Iterable[Consumed], session: str, since_us: int, until_us: int) -> set[tuple[str, int]]:
    """The (broker, queue id) pairs ``session`` consumed from in [since_us, until_us]."""
    return {r.key for r in records if r.session == session and since_us <= r.start_us <= until_us}


@dataclasses.dataclass
class Handoff:
    """One departed queue: when the survivor took it over and first consumed from it."""

    kind: str  # "clean" or "kill"
    mode: str  # server lockReleaseOnDisconnect
    event: int  # which departure (0, 1, ...)
    queue: int
    departed_us: int  # clean: the consumer's "B" line (shutdown begins); kill: just before SIGKILL
    first_us: int  # survivor's first consume start on the queue after departed_us
    born_ms: int  # that message's send time
    first_pull_ms: int | None = None  # survivor's first PULL_MESSAGE for the queue (server pull log)
    first_pull_code: str | None = None  # and the server's answer to it
    broker: str = ""  # the queue's broker ("" from a consumer that did not log it)

    @property
    def first_consume_ms(self) -> float:
        """Departure → the survivor's first consume on the queue (includes waiting for the
        producer's next message for that queue when none was left over)."""
        return (self.first_us - self.departed_us) / 1000

    @property
    def handoff_ms(self) -> float:
        """How long the first message the survivor consumed from the queue waited past the later of
        the departure and its own send: the delay the handoff added to a message. When the survivor
        already pulled the queue before its next message was sent, this is plain delivery latency."""
        return (self.first_us - max(self.departed_us, self.born_ms * 1000)) / 1000

    @property
    def takeover_ms(self) -> float | None:
        """Departure → the survivor's first pull of the queue reaching the server (after its lock
        was granted and its offset read): from then on a waiting message is served at once."""
        if self.first_pull_ms is None:
            return None
        return self.first_pull_ms - self.departed_us / 1000

    def row(self) -> dict:
        return {
            "kind": self.kind, "mode": self.mode, "event": self.event,
            **({"broker": self.broker} if self.broker else {}), "queue": self.queue,
            "handoff_ms": round(self.handoff_ms, 1), "first_consume_ms": round(self.first_consume_ms, 1),
            "takeover_ms": None if self.takeover_ms is None else round(self.takeover_ms, 1),
            "first_pull_code": self.first_pull_code,
        }  # fmt: skip


def read_pulls(pull_log_dir: Path) -> list[dict]:
    return [json.loads(x) for p in sorted(pull_log_dir.glob("pulls-*.jsonl")) for x in p.read_text().splitlines() if x]


def wait_handoff(survivor: Consumer, departed_session: str, departed_us: int, kind: str, mode: str, event: int,
                 timeout: float) -> list[Handoff]:  # fmt: skip
    """Wait until ``survivor`` consumed from every queue the departed session (alone) consumed
    from in the second before ``departed_us``; return one Handoff per such queue."""
    paths = [survivor.log_path.parent / f"{departed_session}.log", survivor.log_path]
    deadline = time.monotonic() + timeout
    while True:
        log = read_log(paths)
        window = (departed_us - 1_000_000, departed_us)
        gone = queues_of(log.records, departed_session, *window) - queues_of(log.records, survivor.session, *window)
        if not gone:
            raise ScenarioError(f"{departed_session} consumed nothing of its own in the second before it left")
        firsts: dict[tuple[str, int], Consumed] = {}
        for r in sorted(log.records, key=lambda r: r.start_us):
            if r.session == survivor.session and r.key in gone and r.start_us > departed_us:
                firsts.setdefault(r.key, r)
        if set(firsts) == gone:
            return [Handoff(kind, mode, event, q, departed_us, r.start_us, r.born_ms, broker=b)
                    for (b, q), r in sorted(firsts.items())]  # fmt: skip
        if not survivor.alive():
            raise ScenarioError(f"survivor {survivor.session} died:\n{survivor.output()[-3000:]}")
        if time.monotonic() > deadline:
            raise ScenarioError(
                f"survivor took only {sorted(firsts)} of {sorted(gone)} within {timeout:.0f}s of {departed_session}'s {kind}"
            )
        time.sleep(0.02)


def add_first_pulls(handoffs: list[Handoff], pulls: list[dict], topic: str, survivor_client_id: str,
                    remote_brokers: Mapping[str, str] | None = None) -> None:  # fmt: skip
    """Fill in each handoff's first pull by the survivor from the server's pull/hold event log.

    A pull event names no broker; with queues on several brokers ``remote_brokers`` (the
    survivor's connections: its address as the server logs it -> the broker that connection is
    for, ``connection_brokers``) tells which broker's queue a pull was for."""
    for h in handoffs:
        mine = [
            e for e in pulls
            if e["topic"] == topic and e["queue_id"] == h.queue and e["client_id"] == survivor_client_id
            and e["arrived_ms"] * 1000 >= h.departed_us
            and (remote_brokers is None or remote_brokers.get(e["remote"]) == h.broker)
        ]  # fmt: skip
        if mine:
            first = min(mine, key=lambda e: e["arrived_ms"])
            h.first_pull_ms, h.first_pull_code = first["arrived_ms"], first["code"]


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    return inodes


def connection_brokers(pid: int, listeners: Mapping[int, str]) -> dict[str, str]:
    """The established TCP connections of process ``pid`` to 127.0.0.1:``port`` for each port of
    ``listeners`` (port -> broker name): "127.0.0.1:<its local port>" (the client's address as the
    server sees it) -> broker name. Linux only (/proc)."""
    inodes = _socket_inodes(pid)
    out = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            local_port, remote_port = int(f[1].rsplit(":", 1)[1], 16), int(f[2].rsplit(":", 1)[1], 16)
            if f[3] == "01" and f[9] in inodes and remote_port in listeners:  # 01: ESTABLISHED
                out[f"127.0.0.1:{local_port}"] = listeners[remote_port]
    return out


def route_listeners(namesrv: str, topic: str) -> dict[int, str]:
    """Port -> broker name of the masters the route of ``topic`` names (all on 127.0.0.1 here)."""
    with WireClient(namesrv, 5.0) as wire:
        answer = wire.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic=topic)
    if answer.code != 0:
        raise ScenarioError(f"route of {topic}: {answer.code} {answer.remark}")
    route = TopicRouteData.from_json(answer.body)
    return {int(b.broker_addrs[0].rsplit(":", 1)[1]): b.broker_name for b in route.broker_datas if 0 in b.broker_addrs}


def wait_balanced(consumers: list[Consumer], queues: int, timeout: float, window_s: float = 1.0) -> None:
    """Wait until, over the last ``window_s``, every consumer consumed from queues/len(consumers)
    queues and together they covered all ``queues`` queues (the group is settled and messages flow)."""
    deadline = time.monotonic() + timeout
    share = queues // len(consumers)
    while True:
        now = now_us()
        log = read_log(c.log_path for c in consumers)
        owned = [queues_of(log.records, c.session, now - int(window_s * 1e6), now) for c in consumers]
        if all(len(o) == share for o in owned) and len(set().union(*owned)) == queues:
            return
        for c in consumers:
            if not c.alive():
                raise ScenarioError(f"{c.session} died:\n{c.output()[-3000:]}")
        if time.monotonic() > deadline:
            raise ScenarioError(f"group not balanced within {timeout:.0f}s: {[sorted(o) for o in owned]}")
        time.sleep(0.1)


def run_handoffs(classpath: str, namesrv: str, workdir: Path, *, mode: str, departures: list[tuple[str, float]],
                 topic: str, pull_log_dir: Path | None = None, rate: float = 50.0, settle_s: float = 1.5,
                 timeout: float = 90.0, queues: int = 8, brokers: int = 1,
                 allocate: str = "") -> list[Handoff]:  # fmt: skip
    """Two orderly consumers (separate JVMs) and a producer at ``rate`` msgs/s on a topic of
    ``queues`` queues on each of ``brokers`` brokers (default: 8 queues on one).

    For each (kind, wait_s) in ``departures``: once the group is balanced (half the queues each,
    messages flowing), wait ``wait_s`` (a kill's phase in the client's 20 s lock-renewal cycle
    decides the ``safe`` release time), then consumer A leaves, by a clean stop ("clean") or kill -9
    ("kill"), while B survives; the time until B consumes from each of A's queues is measured; a
    new A starts. ``pull_log_dir`` (the server's pull/hold event log) adds each queue's first pull
    by B (with several brokers, told apart by B's connection to each: ``connection_brokers``).
    ``allocate="circle"`` gives each consumer queues of every broker (``Consumer``).
    """
    group = f"{topic}-cg"
    producer = Producer(classpath, namesrv, topic, workdir, rate=rate, orders=1000, queues=queues, brokers=brokers)
    consumers: list[Consumer] = []
    results: list[Handoff] = []
    try:
        total_queues = len(producer.layout())
        a = Consumer(classpath, namesrv, topic, group, "A0", workdir, allocate=allocate)
        b = Consumer(classpath, namesrv, topic, group, "B0", workdir, allocate=allocate)
        consumers += [a, b]
        a.wait_started()
        survivor_id = b.wait_started()
        producer.go()
        for i, (kind, wait_s) in enumerate(departures):
            wait_balanced([a, b], total_queues, timeout=60)
            time.sleep(wait_s)
            if kind == "kill":
                departed_us = a.kill()
            elif kind == "clean":
                a.stop()
                departed_us = read_log([a.log_path]).shutdown_begin_us[a.session]
            else:
                raise ValueError(kind)
            results += wait_handoff(b, a.session, departed_us, kind, mode, i, timeout)
            # let B drain the backlog first: a consumer that gives up a queue with messages still
            # cached keeps its lock 20 s more (client unlockDelay), which would only slow the run
            if i + 1 < len(departures):
                time.sleep(settle_s)
                a = Consumer(classpath, namesrv, topic, group, f"A{i + 1}", workdir, allocate=allocate)
                consumers.append(a)
                a.wait_started()
        if pull_log_dir is not None:
            remotes = connection_brokers(b.proc.pid, route_listeners(namesrv, topic)) if brokers > 1 else None
            time.sleep(1.0)  # the server flushes its pull log every 0.5 s
            add_first_pulls(results, read_pulls(pull_log_dir), topic, survivor_id, remotes)
        return results
    finally:
        for c in consumers:
            c.ensure_dead()
        if producer.alive():
            try:
                producer.stop(timeout=30)
            except ScenarioError:
                pass
        producer.ensure_dead()


# --- ordering under churn ---------------------------------------------------------------------


@dataclasses.dataclass
class ChurnEvent:
    at_s: float  # seconds since the producer's "go"
    slot: int
    kind: str  # "clean" or "kill"
    session: str  # the session that left
    replacement: str
    departed_us: int = 0  # kill: just before SIGKILL; clean: the session's "B" line (shutdown begins)


def run_ordering(classpath: str, namesrv: str, workdir: Path, *, topic: str, total: int = 100_000,
                 orders: int = 1000, consumers: int = 3, events: int = 20, gap_s: tuple[float, float] = (1.0, 3.0),
                 producer_threads: int = 8, seed: int = 8, drain_timeout: float = 240.0, queues: int = 8,
                 brokers: int = 1, allocate: str = "") -> dict:  # fmt: skip
    """Issue 8's ordering scenario: ``total`` messages for ``orders`` order ids on a topic of
    ``queues`` queues on each of ``brokers`` brokers (default: 8 queues on one), ``consumers``
    orderly consumers of one group (one JVM each, ``allocate`` as ``Consumer`` takes it), and
    ``events`` churn events ``gap_s`` apart (uniform): a random slot's JVM leaves, half of them
    cleanly and half by kill -9 in random order, and a new JVM takes the slot at once. Then waits
    until every message was consumed, stops everyone cleanly and returns the merged log, the check
    (queues told apart by (broker, queue id) when there are several brokers), the topic's
    ``layout`` and a timeline."""
    rng = random.Random(seed)
    per_order = total // orders
    assert per_order * orders == total
    group = f"{topic}-cg"
    kinds = ["clean", "kill"] * (events // 2) + (["kill"] if events % 2 else [])
    rng.shuffle(kinds)
    producer = Producer(classpath, namesrv, topic, workdir, orders=orders, total=total, threads=producer_threads,
                        queues=queues, brokers=brokers)  # fmt: skip
    slots: list[Consumer] = []
    everyone: list[Consumer] = []
    timeline: list[ChurnEvent] = []
    counter = [0]

    def start(slot: int) -> Consumer:
        counter[0] += 1
        c = Consumer(classpath, namesrv, topic, group, f"c{slot}s{counter[0]}", workdir, allocate=allocate)
        everyone.append(c)
        return c

    t_go = time.monotonic()
    try:
        layout = producer.layout()  # the topic exists on every broker before any consumer starts
        slots = [start(i) for i in range(consumers)]
        for c in slots:
            c.wait_started()
        producer.go()
        t_go = time.monotonic()
        for kind in kinds:
            time.sleep(rng.uniform(*gap_s))
            slot = rng.randrange(consumers)
            old = slots[slot]
            if kind == "kill":
                departed_us = old.kill()
            else:
                old.stop()
                departed_us = read_log([old.log_path]).shutdown_begin_us.get(old.session, now_us())
            slots[slot] = start(slot)
            timeline.append(ChurnEvent(round(time.monotonic() - t_go, 2), slot, kind, old.session, slots[slot].session,
                                       departed_us))  # fmt: skip
        churn_s = time.monotonic() - t_go
        sent = producer.finish(timeout=drain_timeout)
        produced_s = time.monotonic() - t_go
        for c in slots:
            c.wait_started()
        deadline = time.monotonic() + drain_timeout
        while True:
            log = read_log(c.log_path for c in everyone)
            distinct = len({(r.order, r.seq) for r in log.records})
            if distinct >= total or time.monotonic() > deadline:
                break
            for c in slots:
                if not c.alive():
                    raise ScenarioError(f"{c.session} died:\n{c.output()[-3000:]}")
            time.sleep(0.5)
        drained_s = time.monotonic() - t_go
        for c in slots:
            c.stop()
        log = read_log(c.log_path for c in everyone)
        check = check_group(log.records, orders=orders, per_order=per_order, queues=len(layout),
                            layout=layout if brokers > 1 else None)  # fmt: skip
        return {
            "check": check, "log": log, "timeline": timeline, "producer": sent, "seed": seed, "layout": layout,
            "churn_s": round(churn_s, 1), "produced_s": round(produced_s, 1), "drained_s": round(drained_s, 1),
            "sessions": [c.session for c in everyone],
        }  # fmt: skip
    finally:
        for c in everyone:
            c.ensure_dead()
        producer.ensure_dead()
