"""The gRPC path (the 5.x clients' ReceiveMessage, SendMessage and AckMessage) of ``rmqproxy serve``
against the reference Apache RocketMQ 5.3.3 proxy in local mode (``tests/interop/apache_proxy.py``,
its JVMs with the reference's start-script flags), driven by a Python client on the generated stubs;
prints one JSON report (figures, commit, machine), asserts nothing.

Both targets run for the whole run, each is warmed up first (sends, a drain, wakes), then every
measure alternates between them (A, B; B, A in the next round):
(a) receive overshoot: empty receives (a topic nobody sends to) with a long_polling_timeout of 1 s,
    5 s and 20 s and the RPC deadline the Java client sets (await + 3 s), 50 in flight, their
    starts 20 ms apart; answer time minus the await, p50/p99/max, and how each call ended. For
    rmqproxy also server side: its pull event log's hold_ms - suspend_ms of the receives that timed
    out. The reference raises every await to at least 5 s, and refuses a receive whose deadline
    leaves less than that (ILLEGAL_POLLING_TIME): its figures are given against the await asked for
    and against max(await, 5 s);
(b) wake latency: a receive waiting (await 20 s) on an empty topic, then a SendMessage to it; the
    receive's message arriving minus the send's answer arriving, p50/p99/max over N wakes (both
    calls on one asyncio loop of grpc.aio, so the client adds no hop between threads to either).
    For rmqproxy also server side: the woken receives' service_ms in its event log, from the
    message's store waking the receive to its answer leaving the broker for the gRPC layer;
(c) throughput: 1 KiB sends from T threads of the sync grpc client for D seconds after a 1 s ramp,
    msgs/s; then a consumer group drains that backlog from T threads (receives of 32, invisible
    30 s, one AckMessage per batch), msgs/s; with this client process's CPU and the server's: on a
    small machine the Python client may be what limits both rates, not the server;
(d) rmqproxy's remoting path on the same server: ``bench/hold.py``'s wake latency and 1 s timeout
    overshoot (its own pattern: pulls arriving one a millisecond, all held at once);
(e) delayed messages: a receive waiting (await 20 s) on a DELAY topic, then a SendMessage whose
    delivery_timestamp is 1 s ahead; the message arriving minus its delivery time (client side, the
    same machine's clock), and for rmqproxy the receive's answer in its event log minus that time;
(f) returns: a message received with an invisible_duration (1 s; the reference's minimum, 10 s,
    there) and not acked, then receives until it is back; its arrival minus (the first receive's
    call + the invisibility) on this side (an upper bound: the invisibility starts later, on the
    server), and for rmqproxy the answer of the receive that got it back minus (the first's answer
    + the invisibility) in its event log.
Run: ``python bench/grpc_path.py [--quick] [--no-reference] [--receives N] [--wakes N] [--delays N] [--returns N] [--threads T]
[--seconds D]``.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import dataclasses
import json
import os
import queue
import resource
import socket
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402

import hold  # noqa: E402
from e2e import proc_stats  # noqa: E402
from machine import commit, machine  # noqa: E402
from rmqproxy.grpc_wire import pb, rpc  # noqa: E402
from tests.interop.apache_broker import SCRIPT_JVM  # noqa: E402
from tests.interop.apache_proxy import REFERENCE_PROXY_VERSION, ApacheProxy, ReferenceAdmin  # noqa: E402
from tests.interop.server import RunningServer  # noqa: E402

#: Topic (all NORMAL, 4 queues) and consumer group of each workload.
TOPICS = {"idle": "GrpcBenchIdle", "wake": "GrpcBenchWake", "load": "GrpcBenchLoad", "warm": "GrpcBenchWarm",
          "delay": "GrpcBenchDelay", "back": "GrpcBenchReturn"}
#: Message type of each topic that is not NORMAL.
TOPIC_TYPES = {"delay": "DELAY"}
GROUPS = {key: f"{topic}G" for key, topic in TOPICS.items()}
AWAITS_S = (1.0, 5.0, 20.0)
#: How far ahead a delayed message's delivery time is; the invisibility of a return sample on each target.
DELAY_S = 1.0
RETURN_INVISIBLE_S = {"rmqproxy": 1.0}
REFERENCE_MIN_INVISIBLE_S = 10.0
#: The Java client's request timeout: a receive's deadline is its await plus this.
TOLERANCE_S = 3.0
#: The reference proxy's grpcClientConsumerMinLongPollingTimeoutMillis.
REFERENCE_FLOOR_S = 5.0
IN_FLIGHT = 50
STAGGER_S = 1.0  # the first IN_FLIGHT empty receives start spread over this
BODY = b"x" * 1024
HOST = socket.gethostname()  # born_host of the messages sent
BATCH = 32
INVISIBLE_S = 30.0
DRAIN_AWAIT_S = 5.0
RAMP_S = 1.0
HEARTBEAT_S = 10.0
WAKE_LEAD_S = 0.05  # from a wake's receive to its send: the receive is held by then
STALL_S = 30.0
WALL_OFFSET_S = time.time() - time.perf_counter()  # a drain that acks nothing for this long is given up
QUICK = {"receives": 20, "wakes": 20, "seconds": 3, "warmup": 2, "rounds": 1, "delays": 4, "returns": 2}
FULL = {"receives": 200, "wakes": 1000, "seconds": 20, "warmup": 10, "rounds": 2, "delays": 40, "returns": 6}
NOTES = [
    "Client: one Python process, the sync grpc client (one channel per target), T threads; "
    "client_cpu_share near 1 or above means the client (its GIL, protobuf) may bound the throughput, "
    "server_cpu_share says how busy the server was meanwhile.",
    "Receive overshoot is measured against the await asked for; the reference's also against "
    "max(await, 5 s), its floor. A receive it refuses is counted under its outcome, not in the figures.",
    "Remoting figures come from bench/hold.py's functions on the same rmqproxy process: pulls arrive "
    "one a millisecond and are all held at once (gRPC: 50 in flight, starts 20 ms apart).",
]


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclasses.dataclass
class Received:
    """One ReceiveMessage: how it ended (a Code name, or the gRPC status's), what it delivered, and
    when (perf_counter seconds) it was called, answered, and its first message arrived."""

    code: str
    messages: list[Any]
    started: float
    ended: float
    first_message_at: float | None


class Client:
    """A channel to one target and the client sessions on it: a producer of every topic and a simple
    consumer per group, each with its settings on a Telemetry stream kept open and a heartbeat every
    10 s, as the Java client keeps them (the reference forgets a client's settings without them)."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.channel = grpc.insecure_channel(endpoint)
        self.stub = rpc.MessagingServiceStub(self.channel)
        self.metadata: dict[str, tuple[tuple[str, str], ...]] = {}  # role: "producer" or a group
        self.streams: list[tuple[queue.Queue, Any, threading.Thread]] = []
        self.heartbeats: list[tuple[str, Any]] = []
        self.stop = threading.Event()
        self.beater = threading.Thread(target=self._beat, daemon=True)
        try:
            topics = [pb.Resource(name=t) for t in TOPICS.values()]
            self._open("producer", pb.Settings(client_type=pb.PRODUCER, publishing=pb.Publishing(topics=topics)),
                       pb.HeartbeatRequest(client_type=pb.PRODUCER))  # fmt: skip
            for key, group in GROUPS.items():
                entry = pb.SubscriptionEntry(topic=pb.Resource(name=TOPICS[key]),
                                             expression=pb.FilterExpression(type=pb.TAG, expression="*"))  # fmt: skip
                subscription = pb.Subscription(group=pb.Resource(name=group), subscriptions=[entry])
                heartbeat = pb.HeartbeatRequest(group=pb.Resource(name=group), client_type=pb.SIMPLE_CONSUMER)
                self._open(group, pb.Settings(client_type=pb.SIMPLE_CONSUMER, subscription=subscription), heartbeat)
        except BaseException:
            self.close()
            raise
        self.beater.start()

    def _open(self, role: str, settings: Any, heartbeat: Any) -> None:
        """A client id for ``role``, its settings sent (and answered) on a Telemetry stream left open
        (a reader thread takes what the server sends down it), and a first heartbeat."""
        client_id = f"grpc-bench@{os.getpid()}@{role}@{uuid.uuid4().hex[:8]}"
        self.metadata[role] = (("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"),
                               ("x-mq-client-version", "5.0.8"), ("x-mq-protocol", "v2"))  # fmt: skip
        settings.request_timeout.FromSeconds(int(TOLERANCE_S))
        requests: queue.Queue = queue.Queue()
        requests.put(pb.TelemetryCommand(settings=settings))
        call = self.stub.Telemetry(iter(requests.get, None), metadata=self.metadata[role])
        reader = threading.Thread(target=_read_all, args=(call,), daemon=True)
        self.streams.append((requests, call, reader))
        answer = next(call)
        if answer.status.code != pb.OK:
            raise RuntimeError(f"settings of {role} refused: {answer.status}")
        reader.start()
        self.heartbeats.append((role, heartbeat))
        self._heartbeat(role, heartbeat)

    def _heartbeat(self, role: str, request: Any) -> None:
        answer = self.stub.Heartbeat(request, metadata=self.metadata[role], timeout=TOLERANCE_S)
        if answer.status.code != pb.OK:
            raise RuntimeError(f"heartbeat of {role} refused: {answer.status}")

    def _beat(self) -> None:
        while not self.stop.wait(HEARTBEAT_S):
            for role, request in self.heartbeats:
                try:
                    self._heartbeat(role, request)
                except (grpc.RpcError, RuntimeError) as e:
                    progress(f"heartbeat failed: {e}")

    def send(self, topic: str, body: bytes, deliver_at_ms: int | None = None) -> bool:
        """One message in one SendMessage (a DELAY one when ``deliver_at_ms`` is given); whether it was stored."""
        try:
            answer = self.stub.SendMessage(self.send_request(topic, body, deliver_at_ms),
                                           metadata=self.metadata["producer"], timeout=TOLERANCE_S)  # fmt: skip
        except grpc.RpcError:
            return False
        return answer.status.code == pb.OK

    def send_request(self, topic: str, body: bytes, deliver_at_ms: int | None = None) -> Any:
        """A SendMessage of one message (a DELAY one when ``deliver_at_ms`` is given)."""
        message = pb.Message(topic=pb.Resource(name=topic), body=body)
        system = message.system_properties
        system.message_id, system.message_type, system.born_host = "01" + uuid.uuid4().hex.upper(), pb.NORMAL, HOST
        system.born_timestamp.GetCurrentTime()
        if deliver_at_ms is not None:
            system.message_type = pb.DELAY
            system.delivery_timestamp.FromMilliseconds(deliver_at_ms)
        return pb.SendMessageRequest(messages=[message])

    @staticmethod
    def receive_request(key: str, await_s: float, batch: int = BATCH, invisible_s: float = INVISIBLE_S) -> Any:
        """A ReceiveMessage of ``key``'s group on its topic."""
        group, topic = GROUPS[key], pb.Resource(name=TOPICS[key])
        request = pb.ReceiveMessageRequest(group=pb.Resource(name=group), batch_size=batch,
                                           message_queue=pb.MessageQueue(topic=topic))  # fmt: skip
        request.filter_expression.type, request.filter_expression.expression = pb.TAG, "*"
        request.invisible_duration.FromMilliseconds(int(invisible_s * 1000))
        request.long_polling_timeout.FromMilliseconds(int(await_s * 1000))
        return request

    def receive(self, key: str, await_s: float, deadline_s: float, batch: int = BATCH,
                invisible_s: float = INVISIBLE_S) -> Received:  # fmt: skip
        """A ReceiveMessage of ``key``'s group on its topic, timed on this side."""
        group = GROUPS[key]
        request = self.receive_request(key, await_s, batch, invisible_s)
        code, messages, first = "NO_STATUS", [], None
        started = time.perf_counter()
        try:
            for response in self.stub.ReceiveMessage(request, metadata=self.metadata[group], timeout=deadline_s):
                if response.HasField("message"):
                    first = first or time.perf_counter()
                    messages.append(response.message)
                elif response.HasField("status"):
                    code = pb.Code.Name(response.status.code)
        except grpc.RpcError as e:
            code = e.code().name
        return Received(code, messages, started, time.perf_counter(), first)

    def ack(self, key: str, messages: list[Any]) -> list[str]:
        """One AckMessage for ``messages``; the ids of those acked."""
        entries = [pb.AckMessageEntry(message_id=m.system_properties.message_id,
                                      receipt_handle=m.system_properties.receipt_handle) for m in messages]  # fmt: skip
        request = pb.AckMessageRequest(group=pb.Resource(name=GROUPS[key]), topic=pb.Resource(name=TOPICS[key]),
                                       entries=entries)  # fmt: skip
        try:
            answer = self.stub.AckMessage(request, metadata=self.metadata[GROUPS[key]], timeout=TOLERANCE_S)
        except grpc.RpcError:
            return []
        if answer.entries:
            return [e.message_id for e in answer.entries if e.status.code == pb.OK]
        return [e.message_id for e in entries] if answer.status.code == pb.OK else []

    def close(self) -> None:
        """End the Telemetry streams (the server forgets the sessions), the heartbeats and the channel."""
        self.stop.set()
        for requests, call, reader in self.streams:
            requests.put(None)
            call.cancel()
            if reader.is_alive():
                reader.join(timeout=5)
        if self.beater.is_alive():
            self.beater.join(timeout=HEARTBEAT_S)
        self.channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read_all(call: Any) -> None:
    """Take whatever a Telemetry stream brings until it ends (the server's commands go unanswered)."""
    with contextlib.suppress(grpc.RpcError):
        for _ in call:
            pass


@dataclasses.dataclass
class Target:
    """A server under test: what it is, its gRPC endpoint, the process whose CPU is counted, the floor
    it puts under an await, its pull event log (rmqproxy only), and the client talking to it."""

    name: str
    about: str
    endpoint: str
    pid: int
    floor_s: float
    logs: Path | None
    client: Client | None = None


@contextlib.contextmanager
def started(no_reference: bool) -> Iterator[tuple[list[Target], RunningServer]]:
    """rmqproxy serve with a gRPC port and, unless ``no_reference``, the reference proxy, each with
    the topics and groups made and a client connected; all stopped on leaving."""
    with contextlib.ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rmqproxy-grpc-bench-")))
        (workdir / "admin").mkdir()
        topics = {topic: TOPIC_TYPES.get(key, "NORMAL") for key, topic in TOPICS.items()}
        groups = list(GROUPS.values())
        progress("starting rmqproxy serve")
        server = stack.enter_context(RunningServer(grpc=True, message_delay_level=None, workdir=workdir / "rmqproxy"))
        ReferenceAdmin(workdir / "admin").create(server.namesrv, server.broker_addr, topics=topics, groups=groups)
        endpoint = f"127.0.0.1:{server.grpc_port}"
        targets = [Target("rmqproxy", "rmqproxy serve, one process (its CPU counted)", endpoint, server.pid, 0.0,
                          server.store_dir / "logs")]  # fmt: skip
        if not no_reference:
            progress("starting the reference proxy (name server and proxy JVMs)")
            proxy = stack.enter_context(ApacheProxy(message_delay_level=None, jvm=SCRIPT_JVM,
                                                    workdir=workdir / "reference"))  # fmt: skip
            proxy.create(topics=topics, groups=groups)
            about = (f"Apache RocketMQ {REFERENCE_PROXY_VERSION} proxy in local mode, broker embedded, JVM flags "
                     "of the reference's start scripts (8 GiB G1 heap); the proxy JVM's CPU counted (not the name "
                     "server's)")
            targets.append(Target(proxy.name, about, proxy.endpoint, proxy.proxy_pid, REFERENCE_FLOOR_S, None))
        for target in targets:
            target.client = stack.enter_context(Client(target.endpoint))
        yield targets, server


def spread(values: list[float], name: str) -> dict:
    """p50, p99 and max of ``values`` as ``name_p50`` and so on (None when there are none)."""
    if not values:
        return {f"{name}_p50": None, f"{name}_p99": None, f"{name}_max": None}
    return {f"{name}_p50": hold.pct(values, 0.5), f"{name}_p99": hold.pct(values, 0.99),
            f"{name}_max": round(max(values), 3)}  # fmt: skip


def cpu_now(pid: int) -> tuple[float, float]:
    """CPU seconds so far of this client process (all its threads, grpc's own included) and of ``pid``."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    user, kernel, _ = proc_stats(pid)
    return usage.ru_utime + usage.ru_stime, user + kernel


def cpu_figures(before: tuple[float, float], after: tuple[float, float], seconds: float, msgs: int) -> dict:
    """Client and server CPU between two ``cpu_now`` readings ``seconds`` apart, in which ``msgs`` went."""
    client, server = after[0] - before[0], after[1] - before[1]
    return {"client_cpu_s": round(client, 2), "client_cpu_share": round(client / seconds, 2),
            "server_cpu_s": round(server, 2), "server_cpu_share": round(server / seconds, 2),
            "server_cpu_us_per_msg": round(server / msgs * 1e6, 1) if msgs else None}  # fmt: skip


def in_order(targets: list[Target], round_: int) -> list[Target]:
    """The targets in the order of round ``round_``: each goes first every other round."""
    return targets if round_ % 2 == 0 else targets[::-1]


def share(total: int, rounds: int, round_: int) -> int:
    """Round ``round_``'s part of ``total``."""
    return total // rounds + (1 if round_ < total % rounds else 0)


def empty_receives(client: Client, await_s: float, count: int) -> list[tuple[str, float]]:
    """``count`` receives on the idle topic, ``IN_FLIGHT`` at a time, the first ones starting
    ``STAGGER_S / IN_FLIGHT`` apart; how each ended and its seconds from call to answer."""
    lock, results = threading.Lock(), []
    left = [count]

    def worker(k: int) -> None:
        time.sleep(k * STAGGER_S / IN_FLIGHT)
        while True:
            with lock:
                if left[0] == 0:
                    return
                left[0] -= 1
            got = client.receive("idle", await_s, await_s + TOLERANCE_S)
            results.append((got.code, got.ended - got.started))

    workers = min(IN_FLIGHT, count)
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(worker, range(workers)))
    return results


def overshoot_summary(samples: list[tuple[str, float]], await_s: float, floor_s: float) -> dict:
    """Client-side overshoot of the receives answered MESSAGE_NOT_FOUND, against the await (and the
    floor, where the target has one), and how every receive ended."""
    answered = [s for code, s in samples if code == "MESSAGE_NOT_FOUND"]
    others = [s * 1000 for code, s in samples if code != "MESSAGE_NOT_FOUND"]
    out = {"await_s": await_s, "deadline_s": await_s + TOLERANCE_S, "receives": len(samples),
           "outcomes": dict(Counter(code for code, _ in samples)),
           **spread([(s - await_s) * 1000 for s in answered], "client_overshoot_ms")}  # fmt: skip
    if floor_s:
        waited = max(await_s, floor_s)
        out["floor_s"] = floor_s
        out.update(spread([(s - waited) * 1000 for s in answered], "client_overshoot_vs_floor_ms"))
    if others:
        out["other_outcomes_elapsed_ms_p50"] = round(statistics.median(others), 3)
    return out


def grpc_events(logs: Path, topic: str) -> list[dict]:
    """rmqproxy's pull events of gRPC receives on ``topic``, in the order they arrived (the event log
    is flushed every 0.5 s: wait that long after the last receive)."""
    events = []
    for path in sorted(logs.glob("pulls-*.jsonl")):
        for line in path.read_text().splitlines():
            event = json.loads(line) if line.strip() else {}
            if event.get("protocol") == "grpc" and event["topic"] == topic:
                events.append(event)
    return sorted(events, key=lambda e: e["arrived_ms"])


def answered_ms(event: dict) -> float:
    """When the server answered a receive, epoch ms (within 1 ms: ``arrived_ms`` is truncated)."""
    return event["arrived_ms"] + event["total_ms"]


def server_overshoot(logs: Path, topic: str) -> dict:
    """rmqproxy's own figure: hold_ms - suspend_ms of the gRPC receives on ``topic`` that ended by
    timeout, by the wait asked."""
    by_wait: dict[int, list[float]] = {}
    for event in grpc_events(logs, topic):
        if event["wake"] == "timeout":
            by_wait.setdefault(event["suspend_ms"], []).append(event["hold_ms"] - event["suspend_ms"])
    return {f"{ms / 1000:g}s": {"events": len(late), **spread(late, "server_overshoot_ms")}
            for ms, late in sorted(by_wait.items())}  # fmt: skip


def receive_overshoot(targets: list[Target], receives: int, rounds: int) -> dict:
    """(a) on every target, for every await, in interleaved rounds."""
    samples: dict[str, dict[float, list]] = {t.name: {a: [] for a in AWAITS_S} for t in targets}
    for await_s in AWAITS_S:
        for round_ in range(rounds):
            for target in in_order(targets, round_):
                count = share(receives, rounds, round_)
                progress(f"{target.name}: {count} empty receives, await {await_s:g} s")
                samples[target.name][await_s] += empty_receives(target.client, await_s, count)
    time.sleep(1.0)  # rmqproxy's event log is flushed every 0.5 s
    report = {}
    for target in targets:
        report[target.name] = {f"{a:g}s": overshoot_summary(samples[target.name][a], a, target.floor_s)
                               for a in AWAITS_S}  # fmt: skip
        if target.logs is not None:
            report[target.name]["server_side"] = server_overshoot(target.logs, TOPICS["idle"])
    return report


def wake_latency(client: Client, wakes: int) -> tuple[list[float], int]:
    """(b): latencies in ms of ``wakes`` wakes, and how many receives got nothing (missed)."""
    return asyncio.run(_wakes(client, wakes))


async def _wakes(client: Client, wakes: int) -> tuple[list[float], int]:
    """(b) on a grpc.aio channel of its own, with the sync client's sessions (their metadata)."""
    latencies, missed = [], 0
    async with grpc.aio.insecure_channel(client.endpoint) as channel:
        stub = rpc.MessagingServiceStub(channel)

        async def first_message() -> tuple[float | None, list[Any]]:
            messages, first = [], None
            call = stub.ReceiveMessage(client.receive_request("wake", 20.0), metadata=client.metadata[GROUPS["wake"]],
                                       timeout=20.0 + TOLERANCE_S)  # fmt: skip
            with contextlib.suppress(grpc.RpcError):
                async for response in call:
                    if response.HasField("message"):
                        first = first or time.perf_counter()
                        messages.append(response.message)
            return first, messages

        for _ in range(wakes):
            waiting = asyncio.create_task(first_message())
            await asyncio.sleep(WAKE_LEAD_S)
            try:
                answer = await stub.SendMessage(client.send_request(TOPICS["wake"], b"w" * 100),
                                                metadata=client.metadata["producer"], timeout=TOLERANCE_S)  # fmt: skip
                stored = answer.status.code == pb.OK
            except grpc.RpcError:
                stored = False
            answered = time.perf_counter()
            first, messages = await waiting
            if not stored or first is None:
                missed += 1
                continue
            latencies.append((first - answered) * 1000)
            client.ack("wake", messages)
    return latencies, missed


def wake_rounds(targets: list[Target], wakes: int, rounds: int) -> dict:
    """(b) on every target in interleaved rounds."""
    found: dict[str, tuple[list[float], int]] = {t.name: ([], 0) for t in targets}
    since_ms = time.time() * 1000  # the warm-up's wakes went to the same topic
    for round_ in range(rounds):
        for target in in_order(targets, round_):
            count = share(wakes, rounds, round_)
            progress(f"{target.name}: {count} wakes")
            latencies, missed = wake_latency(target.client, count)
            found[target.name] = (found[target.name][0] + latencies, found[target.name][1] + missed)
    time.sleep(1.0)  # rmqproxy's event log is flushed every 0.5 s
    report = {name: {"wakes": wakes, "missed": missed, "await_s": 20.0, **spread(latencies, "latency_ms")}
              for name, (latencies, missed) in found.items()}  # fmt: skip
    for target in targets:
        if target.logs is not None:
            report[target.name]["server_side"] = server_wake(target.logs, TOPICS["wake"], since_ms)
    return report


def server_wake(logs: Path, topic: str, since_ms: float) -> dict:
    """rmqproxy's own figure for (b): service_ms of the receives on ``topic`` since ``since_ms``
    (epoch ms) that a message woke, from the send's store waking the receive (in the same reactor
    turn) to its answer leaving the broker for the gRPC layer: the server's part of a wake without
    either call's scheduling on this machine, but also without the hop to grpc's thread and the
    write."""
    woken = [e["service_ms"] for e in grpc_events(logs, topic)
             if e["wake"] == "arrival" and e["held"] and e["arrived_ms"] >= since_ms]  # fmt: skip
    return {"events": len(woken), **spread(woken, "server_wake_ms")}


def wall(perf: float) -> float:
    """A ``time.perf_counter`` reading as epoch seconds (delivery times are epoch milliseconds)."""
    return perf + WALL_OFFSET_S


def taken(client: Client, key: str, invisible_s: float = INVISIBLE_S, give_up_s: float = 40.0) -> Received | None:
    """Receives of one message of ``key``'s group (await 20 s each) until one comes, for at most
    ``give_up_s``; that receive, or None."""
    end = time.perf_counter() + give_up_s
    while time.perf_counter() < end:
        got = client.receive(key, 20.0, 20.0 + TOLERANCE_S, batch=1, invisible_s=invisible_s)
        if got.messages:
            return got
    return None


def delayed(client: Client, samples: int) -> tuple[list[float], list[int], int]:
    """(e): for each sample a receive waits, then a message due ``DELAY_S`` ahead is sent; its arrival
    minus its delivery time in ms, the delivery times (epoch ms), and how many never came."""
    late, due, missed = [], [], 0
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        for _ in range(samples):
            waiting = pool.submit(client.receive, "delay", 20.0, 20.0 + TOLERANCE_S, 1)
            time.sleep(WAKE_LEAD_S)
            deliver_at_ms = int((time.time() + DELAY_S) * 1000)
            if not client.send(TOPICS["delay"], b"d" * 100, deliver_at_ms):
                waiting.result()
                missed += 1
                continue
            got = waiting.result()
            if got.first_message_at is None:
                got = taken(client, "delay")  # late beyond the await: counted missed, taken off the topic
                missed += 1
                if got is not None:
                    client.ack("delay", got.messages)
                continue
            late.append(wall(got.first_message_at) * 1000 - deliver_at_ms)
            due.append(deliver_at_ms)
            client.ack("delay", got.messages)
    return late, due, missed


def returned(client: Client, samples: int, invisible_s: float) -> tuple[list[float], int]:
    """(f): for each sample a message is sent, received with ``invisible_s`` and not acked, then
    received until it is back; ms from (the first receive's call + ``invisible_s``) to its arrival,
    and how many did not come back as the same message."""
    late, missed = [], 0
    for _ in range(samples):
        client.send(TOPICS["back"], b"r" * 100)
        first = taken(client, "back", invisible_s)
        back = taken(client, "back", give_up_s=invisible_s + 40.0) if first is not None else None
        if back is None or back.messages[0].system_properties.message_id != first.messages[0].system_properties.message_id:
            missed += 1
        else:
            late.append((back.first_message_at - first.started - invisible_s) * 1000)
        if back is not None:
            client.ack("back", back.messages)
    return late, missed


def server_delayed(logs: Path, due: list[int]) -> dict:
    """rmqproxy's own delay figure: each delayed message's receive answered (event log) minus its due time."""
    got = [answered_ms(e) for e in grpc_events(logs, TOPICS["delay"]) if e["msgs"]]
    if len(got) != len(due):
        return {"unmatched": f"{len(got)} receives delivered for {len(due)} delayed messages"}
    return spread([a - d for a, d in zip(got, due, strict=True)], "server_late_ms")


def server_returned(logs: Path, invisible_s: float) -> dict:
    """rmqproxy's own return figure: the answer of the receive that got a message back minus (the
    first receive's answer + the invisibility), from the event log's pairs of delivering receives."""
    got = [answered_ms(e) for e in grpc_events(logs, TOPICS["back"]) if e["msgs"]]
    if len(got) % 2:
        return {"unmatched": f"{len(got)} delivering receives, not pairs"}
    return spread([b - a - invisible_s * 1000 for a, b in zip(got[::2], got[1::2], strict=True)], "server_late_ms")


def timers(targets: list[Target], delays: int, returns: int, rounds: int) -> dict:
    """(e) and (f) on every target in interleaved rounds, with rmqproxy's server-side figures."""
    found = {t.name: {"delay": ([], [], 0), "return": ([], 0)} for t in targets}
    for round_ in range(rounds):
        for target in in_order(targets, round_):
            count = share(delays, rounds, round_)
            progress(f"{target.name}: {count} delayed messages, due {DELAY_S:g} s ahead")
            late, due, missed = delayed(target.client, count)
            had = found[target.name]["delay"]
            found[target.name]["delay"] = (had[0] + late, had[1] + due, had[2] + missed)
            invisible_s = RETURN_INVISIBLE_S.get(target.name, REFERENCE_MIN_INVISIBLE_S)
            count = share(returns, rounds, round_)
            progress(f"{target.name}: {count} returns after {invisible_s:g} s invisible")
            late, missed = returned(target.client, count, invisible_s)
            had = found[target.name]["return"]
            found[target.name]["return"] = (had[0] + late, had[1] + missed)
    time.sleep(1.0)
    report = {}
    for target in targets:
        (late, due, missed), (back, back_missed) = found[target.name]["delay"], found[target.name]["return"]
        invisible_s = RETURN_INVISIBLE_S.get(target.name, REFERENCE_MIN_INVISIBLE_S)
        report[target.name] = {
            "delay": {"due_ahead_s": DELAY_S, "samples": len(late), "missed": missed, **spread(late, "client_late_ms"),
                      **({"server_side": server_delayed(target.logs, due)} if target.logs and not missed else {})},
            "return": {"invisible_s": invisible_s, "samples": len(back), "missed": back_missed,
                       **spread(back, "client_late_ms"),
                       **({"server_side": server_returned(target.logs, invisible_s)}
                          if target.logs and not back_missed else {})},
        }  # fmt: skip
    return report


def send_load(target: Target, key: str, threads: int, ramp_s: float, seconds: float) -> dict:
    """(c) sends: ``threads`` threads send 1 KiB messages to ``key``'s topic one at a time for
    ``ramp_s + seconds``; msgs/s, latency and CPU over the last ``seconds``. ``stored``: every
    message stored, the backlog a drain then takes."""
    client = target.client
    begin = time.perf_counter()
    window = (begin + ramp_s, begin + ramp_s + seconds)

    def worker() -> tuple[int, int, list[float]]:
        stored, failed, latencies = 0, 0, []
        while (sent := time.perf_counter()) < window[1]:
            if not client.send(TOPICS[key], BODY):
                failed += 1
                continue
            stored += 1
            if window[0] <= (answered := time.perf_counter()) < window[1]:
                latencies.append((answered - sent) * 1000)
        return stored, failed, latencies

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        futures = [pool.submit(worker) for _ in range(threads)]
        time.sleep(max(0.0, window[0] - time.perf_counter()))
        before = cpu_now(target.pid)
        time.sleep(max(0.0, window[1] - time.perf_counter()))
        after = cpu_now(target.pid)
        results = [f.result() for f in futures]
    latencies = [x for _, _, ms in results for x in ms]
    return {"threads": threads, "seconds": seconds, "msgs_per_s": round(len(latencies) / seconds),
            **spread(latencies, "send_ms"), "failed": sum(f for _, f, _ in results),
            "stored": sum(s for s, _, _ in results), **cpu_figures(before, after, seconds, len(latencies))}  # fmt: skip


def drain(target: Target, key: str, expected: int, threads: int) -> dict:
    """(c) drain: ``threads`` threads receive batches from ``key``'s group and ack each batch, until
    ``expected`` distinct messages are acked (or none is for ``STALL_S``); msgs/s and CPU."""
    client = target.client
    lock, done = threading.Lock(), threading.Event()
    acked: set[str] = set()
    counts: Counter = Counter()
    end: dict[str, Any] = {}

    def worker() -> None:
        while not done.is_set():
            got = client.receive(key, DRAIN_AWAIT_S, DRAIN_AWAIT_S + TOLERANCE_S)
            with lock:
                counts[got.code] += 1
            if not got.messages:
                if got.code not in ("OK", "MESSAGE_NOT_FOUND"):
                    time.sleep(0.01)
                continue
            ids = client.ack(key, got.messages)
            with lock:
                counts["delivered"] += len(got.messages)
                acked.update(ids)
                if len(acked) >= expected and not done.is_set():
                    end.update(at=time.perf_counter(), cpu=cpu_now(target.pid))
                    done.set()

    before, begin = cpu_now(target.pid), time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        futures = [pool.submit(worker) for _ in range(threads)]
        last, moved = 0, begin
        while not done.wait(1.0):
            if len(acked) != last:
                last, moved = len(acked), time.perf_counter()
            elif time.perf_counter() - moved > STALL_S:
                end.update(at=moved, cpu=cpu_now(target.pid))
                done.set()
        for future in futures:
            future.result()
    seconds = end["at"] - begin
    return {"threads": threads, "batch": BATCH, "expected": expected, "acked": len(acked),
            "drained": len(acked) >= expected, "seconds": round(seconds, 2),
            "msgs_per_s": round(len(acked) / seconds) if seconds > 0 else None,
            "redelivered": counts.pop("delivered", 0) - len(acked), "receive_outcomes": dict(counts),
            **cpu_figures(before, end["cpu"], seconds, len(acked))}  # fmt: skip


def throughput(targets: list[Target], threads: int, seconds: float, rounds: int) -> dict:
    """(c) in interleaved rounds: each round sends to every target, then drains every target; the
    medians over rounds, and rmqproxy's over the reference's."""
    report: dict[str, dict[str, list]] = {t.name: {"send": [], "drain": []} for t in targets}
    for round_ in range(rounds):
        backlog = {}
        for target in in_order(targets, round_):
            progress(f"{target.name}: sends from {threads} threads for {RAMP_S:g} + {seconds:g} s")
            sent = send_load(target, "load", threads, RAMP_S, seconds)
            backlog[target.name] = sent["stored"]
            report[target.name]["send"].append(sent)
        for target in in_order(targets, round_):
            progress(f"{target.name}: draining {backlog[target.name]} messages")
            report[target.name]["drain"].append(drain(target, "load", backlog[target.name], threads))
    medians = {name: {f"{phase}_msgs_per_s_median": statistics.median(r["msgs_per_s"] or 0 for r in runs[phase])
                      for phase in ("send", "drain")} for name, runs in report.items()}  # fmt: skip
    out: dict[str, Any] = {name: {**runs, **medians[name]} for name, runs in report.items()}
    if len(targets) == 2:
        ours, theirs = medians[targets[0].name], medians[targets[1].name]
        out["rmqproxy_over_reference"] = {
            phase: round(ours[f"{phase}_msgs_per_s_median"] / theirs[f"{phase}_msgs_per_s_median"], 3)
            if theirs[f"{phase}_msgs_per_s_median"] else None for phase in ("send", "drain")
        }  # fmt: skip
    return out


def first_polls(target: Target) -> None:
    """One receive of each group that is sent to before it receives (warm, load), as a consumer's first
    poll: a new group then starts at the queue's start (both servers may start one at the queue's end
    once its messages are no longer in memory). The deadline leaves the reference its 5 s floor."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda key: target.client.receive(key, 1.0, 1.0 + REFERENCE_FLOOR_S + TOLERANCE_S),
                      ("warm", "load")))  # fmt: skip


def warm_up(target: Target, threads: int, seconds: float) -> None:
    """Every path measured, for a while, before any measure: sends, their drain, wakes."""
    progress(f"{target.name}: warm-up, {seconds:g} s of sends, their drain, wakes")
    sent = send_load(target, "warm", threads, 0.0, seconds)
    drain(target, "warm", sent["stored"], threads)
    wake_latency(target.client, 10)


def remoting(server: RunningServer, wakes: int, pulls: int) -> dict:
    """(d): bench/hold.py's wake latency and 1 s timeout overshoot on rmqproxy's remoting port."""
    progress(f"rmqproxy remoting: {wakes} wakes, {pulls} held pulls")
    return {"wake_latency": asyncio.run(hold.wake_latency(server.namesrv, wakes)),
            "timeout_overshoot": asyncio.run(hold.overshoot(server.namesrv, pulls, server.store_dir / "logs",
                                                            topic="GrpcBenchRemoting"))}  # fmt: skip


def measure(args: argparse.Namespace, report: dict) -> None:
    """Start the targets, warm them up and take every measure into ``report``."""
    with started(args.no_reference) as (targets, server):
        report["targets"] = {t.name: {"about": t.about, "endpoint": t.endpoint, "await_floor_s": t.floor_s}
                             for t in targets}  # fmt: skip
        for target in targets:
            first_polls(target)
        for target in targets:
            warm_up(target, args.threads, args.warmup)
        report["receive_overshoot"] = receive_overshoot(targets, args.receives, args.rounds)
        report["wake_latency"] = wake_rounds(targets, args.wakes, args.rounds)
        report["timers"] = timers(targets, args.delays, args.returns, args.rounds)
        report["throughput"] = throughput(targets, args.threads, args.seconds, args.rounds)
        report["remoting"] = remoting(server, args.wakes, args.receives)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="few receives and wakes, short phases, one round")
    parser.add_argument("--no-reference", action="store_true", help="rmqproxy only")
    parser.add_argument("--receives", type=int, help="empty receives per await per target (200; quick 20)")
    parser.add_argument("--wakes", type=int, help="wakes per target (1000; quick 20)")
    parser.add_argument("--delays", type=int, help="delayed messages per target (40; quick 4)")
    parser.add_argument("--returns", type=int, help="unacked messages waited back per target (6; quick 2)")
    parser.add_argument("--threads", type=int, default=16, help="client threads sending and draining")
    parser.add_argument("--seconds", type=float, help="seconds of measured sends per round (20; quick 3)")
    args = parser.parse_args(argv)
    for name, value in (QUICK if args.quick else FULL).items():
        if getattr(args, name, None) is None:
            setattr(args, name, value)
    report: dict[str, Any] = {
        "benchmark": "grpc", "date": time.strftime("%Y-%m-%d %H:%M"), "commit": commit(), "machine": machine(),
        "options": {"quick": args.quick, "reference": not args.no_reference, "receives": args.receives,
                    "wakes": args.wakes, "delays": args.delays, "returns": args.returns, "threads": args.threads, "seconds": args.seconds, "warmup_s": args.warmup,
                    "rounds": args.rounds, "in_flight": IN_FLIGHT, "body_bytes": len(BODY)},
    }  # fmt: skip
    measure(args, report)
    report["notes"] = NOTES
    print(json.dumps(report, indent=2), flush=True)


if __name__ == "__main__":
    main()
