"""Issue 9 end to end: ``rmqproxy serve`` scraped every second by a real Prometheus while real Java
clients (4.9.8) run traffic that exercises every panel; then every expression of every dashboard
panel and every alert rule is asked of Prometheus's HTTP API.

The traffic (``tests/interop/java/MetricsTraffic.java``, and ``GrpcTraffic``, a gRPC client's
sends, receives, never-acked messages and DLQ forwards for the dashboards' gRPC row): a slow producer (1 msg/s) whose consumer's
pulls are held until a message arrives; a busy topic (50 msg/s) pulled every 100 ms, so most pulls
are not held, with one message in ten answered RECONSUME_LATER once; a pull consumer asking with a
2 s suspend time on an idle topic, so its holds end by timeout; orderly consumers joining and
leaving, so queue locks change hands. A silent consumer (a socket that sent one heartbeat and never
answers) is the client that does not report its statistics.

What "returns data" means: the instant query's result is not empty and has at least one finite
value (a quantile over a window without increase is NaN), and every label a panel's legend names
is on the returned series. Grafana's variables are replaced as with "All" selected
(``tests/dashboards/exprs.py``). Alert rules only fire on bad conditions, so for them the probes
are asked instead: each rule's sub-expressions with the threshold comparison and set operators
removed (``dashboards/alerts.py``, ``Rule.probes``); the whole expression must still evaluate
without error, and Prometheus itself, loaded with the committed rules file, must report every rule
healthy and raise the two "clients not reporting" alerts for the silent consumer only.

Plausibility is checked on the same panel expressions with a variable pinned (the slow or idle
topic), e.g. hold p50 of the slow topic >= 1 s, service time p99 < 50 ms, client pull RT within a
factor 2 of the server's mean pull latency, timeout overshoot p99 < 250 ms, 2 handoffs or more.

Marked interop (Java and Maven); without prometheus on PATH it skips, or fails when ``CI=true``.
Every series has data about 15-20 s after the Java program starts; the module takes ~30 s once the
Maven classpath is built.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from codec.bodies import ConsumerData, HeartbeatData, build_subscription
from codec.codes import RequestCode
from codec.command import RemotingCommand
from codec.frame import FrameDecoder
from dashboards import alerts
from tests.needs import require_java_tools

from ..dashboards.exprs import ALERTS, concrete, dashboards, legend_labels, panel_targets
from ..dashboards.prometheus import RunningPrometheus, finite
from ..interop.oracle import build_classpath
from ..interop.server import RunningServer, free_port

pytestmark = pytest.mark.interop

PROGRAM = Path(__file__).resolve().parents[1] / "interop" / "java" / "MetricsTraffic.java"
PREFIX = "Mx"
SLOW, BUSY, IDLE, ORDERLY = (PREFIX + t for t in ("Slow", "Busy", "Idle", "Orderly"))
SILENT_GROUP = PREFIX + "-silent"
GRPC_TOPIC = PREFIX + "Grpc"
#: Everything below must be true within this many seconds of the traffic starting.
DEADLINE_S = 75.0
#: Absolute rates are checked over a window shorter than the run: over the dashboards' 1 m window
#: they would still be ramping up (rate() divides by the whole window) while the run is younger
#: than a minute. Quantiles and means are ratios of rates, unaffected, and keep the 1 m window.
RECENT = {"__rate_interval": "15s"}
WHOLE_RUN = {"__rate_interval": "5m"}


MAX_HELD_PULLS = 1000  # exported as rmqproxy_held_pulls_limit; the Pull path stat divides by it


class MetricsServer(RunningServer):
    """``rmqproxy serve`` with /metrics on ``metrics_port`` and client stats polled every 2 s.

    The flags go last, after anything ``RunningServer`` adds (it turns metrics off by default).
    """

    def __init__(self, metrics_port: int, **kwargs) -> None:
        self.metrics_port = metrics_port
        super().__init__(**kwargs)

    @property
    def command(self) -> list[str]:
        return super().command + [
            "--metrics-prom-exporter-port", str(self.metrics_port), "--client-stats-interval-seconds", "2",
            "--max-held-pulls", str(MAX_HELD_PULLS),
        ]  # fmt: skip


class SilentConsumer:
    """A push consumer of ``group`` that sends one heartbeat and then never reads its socket, so the
    server's GET_CONSUMER_RUNNING_INFO requests to it time out (a stuck client process)."""

    def __init__(self, namesrv: str, group: str, topic: str) -> None:
        host, port = namesrv.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        heartbeat = HeartbeatData(
            client_id=f"127.0.0.1@{group}",
            consumer_data_set=[ConsumerData(
                group_name=group, consume_type="CONSUME_PASSIVELY", message_model="CLUSTERING",
                consume_from_where="CONSUME_FROM_LAST_OFFSET", subscription_data_set=[build_subscription(topic, "*")],
                unit_mode=False,
            )],
        )  # fmt: skip
        self.sock.sendall(RemotingCommand(code=RequestCode.HEART_BEAT, opaque=1, body=heartbeat.to_json()).encode())
        decoder = FrameDecoder()
        while True:
            data = self.sock.recv(65536)
            assert data, "server closed the silent consumer's connection"
            answers = [RemotingCommand.decode(f) for f in decoder.feed(data)]
            if any(a.is_response and a.opaque == 1 for a in answers):
                return

    def close(self) -> None:
        self.sock.close()


class GrpcTraffic:
    """A RocketMQ 5 gRPC client's traffic (a Python client on the generated stubs), for the
    dashboards' gRPC row: a message sent every second to ``GRPC_TOPIC``; one group receives and
    acks (receives held up to 1 s, woken by arrivals or ending by timeout), one never acks (its
    messages stay in flight and come back every second: redeliveries), one forwards each message
    it gets to its DLQ."""

    def __init__(self, server: RunningServer) -> None:
        import grpc

        from codec.codes import RequestCode as C
        from rmqproxy.grpc_wire import pb, rpc

        from ..interop.wire import WireClient

        self.pb = pb
        with WireClient(server.broker_addr) as wire:
            wire.call(C.UPDATE_AND_CREATE_TOPIC, topic=GRPC_TOPIC, default_topic="TBW102", read_queue_nums=4,
                      write_queue_nums=4, perm=6, topic_filter_type="SINGLE_TAG", topic_sys_flag=0, order=False)  # fmt: skip
        self.channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
        self.stub = rpc.MessagingServiceStub(self.channel)
        self.metadata = [("x-mq-client-id", "metrics-grpc@1")]
        self.stopped = threading.Event()
        self.threads = [threading.Thread(target=self._guarded, args=(fn,), daemon=True)
                        for fn in (self._send, self._ack, self._never_ack, self._forward)]  # fmt: skip
        for thread in self.threads:
            thread.start()

    def _guarded(self, fn: Callable[[], None]) -> None:
        import grpc

        while not self.stopped.is_set():
            try:
                fn()
            except grpc.RpcError:
                time.sleep(0.2)

    def _send(self) -> None:
        pb = self.pb
        message = pb.Message(topic=pb.Resource(name=GRPC_TOPIC), body=b"metrics")
        message.system_properties.message_id = f"01MX{time.monotonic_ns()}"
        message.system_properties.message_type = pb.NORMAL
        self.stub.SendMessage(pb.SendMessageRequest(messages=[message]), metadata=self.metadata, timeout=5)
        time.sleep(1.0)  # slow, so its held receives wait long, as the slow topic's pulls do

    def _receive(self, group: str, invisible_s: float) -> list:
        pb = self.pb
        request = pb.ReceiveMessageRequest(group=pb.Resource(name=group), batch_size=8,
                                           message_queue=pb.MessageQueue(topic=pb.Resource(name=GRPC_TOPIC)))  # fmt: skip
        request.filter_expression.type, request.filter_expression.expression = pb.TAG, "*"
        request.invisible_duration.FromSeconds(int(invisible_s))
        request.long_polling_timeout.FromSeconds(1)
        responses = self.stub.ReceiveMessage(request, metadata=self.metadata, timeout=5)
        return [r.message for r in responses if r.HasField("message")]

    def _ack(self) -> None:
        pb = self.pb
        entries = [pb.AckMessageEntry(message_id=m.system_properties.message_id,
                                      receipt_handle=m.system_properties.receipt_handle)
                   for m in self._receive(GRPC_TOPIC + "-ack", 10)]  # fmt: skip
        if entries:
            self.stub.AckMessage(pb.AckMessageRequest(group=pb.Resource(name=GRPC_TOPIC + "-ack"),
                                                      topic=pb.Resource(name=GRPC_TOPIC), entries=entries),
                                 metadata=self.metadata, timeout=5)  # fmt: skip

    def _never_ack(self) -> None:
        self._receive(GRPC_TOPIC + "-slow", 1)

    def _forward(self) -> None:
        pb = self.pb
        for m in self._receive(GRPC_TOPIC + "-dead", 10):
            self.stub.ForwardMessageToDeadLetterQueue(pb.ForwardMessageToDeadLetterQueueRequest(
                group=pb.Resource(name=GRPC_TOPIC + "-dead"), topic=pb.Resource(name=GRPC_TOPIC),
                receipt_handle=m.system_properties.receipt_handle, message_id=m.system_properties.message_id,
                delivery_attempt=1, max_delivery_attempts=1), metadata=self.metadata, timeout=5)  # fmt: skip

    def close(self) -> None:
        self.stopped.set()
        for thread in self.threads:
            thread.join(timeout=10)
        self.channel.close()


class Stack:
    """The running pieces, and queries over what Prometheus has scraped so far."""

    def __init__(self, prom: RunningPrometheus, traffic: subprocess.Popen, traffic_log: Path) -> None:
        self.prom = prom
        self.traffic = traffic
        self.traffic_log = traffic_log
        self.started = time.monotonic()
        self.seen: dict[str, object] = {}  # values the plausibility tests checked, printed with -s

    @property
    def remaining(self) -> float:
        return max(1.0, self.started + DEADLINE_S - time.monotonic())

    def values(self, expr: str) -> dict[tuple, float]:
        """Instant query → {sorted label items: value}."""
        return {tuple(sorted(r["metric"].items())): float(r["value"][1]) for r in self.prom.query(expr)}

    def by(self, expr: str, label: str) -> dict[str, float]:
        """Instant query → {value of ``label``: value} (the series must differ in ``label``)."""
        return {dict(k)[label]: v for k, v in self.values(expr).items()}

    def one(self, expr: str, **labels: str) -> float:
        """The value of the single series of ``expr`` whose labels include ``labels``."""
        matches = [v for k, v in self.values(expr).items() if labels.items() <= dict(k).items()]
        assert len(matches) == 1, f"{expr} {labels}: {self.values(expr)}"
        return matches[0]


def eventually(check: Callable[[], None], timeout: float, interval: float = 1.0) -> None:
    """Run ``check`` until it stops raising AssertionError; after ``timeout`` s re-raise the last."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            check()
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        time.sleep(interval)


def panel(dashboard: str, title: str, ref: str = "A", **variables: str) -> str:
    """A committed panel's expression, variables as with "All" selected unless pinned here."""
    (target,) = [t for t in panel_targets() if (t.dashboard, t.panel, t.ref) == (dashboard, title, ref)]
    return concrete(target.expr, **variables)


def panel_gaps(stack: Stack) -> list[str]:
    """Why each panel target does not return data (yet)."""
    gaps = []
    for target in panel_targets():
        expr = concrete(target.expr)
        result = stack.prom.query(expr)
        if not result:
            gaps.append(f"{target}: no series for {expr}")
        elif not finite(result):
            gaps.append(f"{target}: only NaN/Inf for {expr}")
        else:
            for label in legend_labels(target.legend) - {k for r in result for k in r["metric"]}:
                gaps.append(f"{target}: legend label {label!r} on no series of {expr}")
    return gaps


def probe_gaps(stack: Stack) -> list[str]:
    return [
        f"{rule.alert}: no finite data for probe {probe}"
        for rule in alerts.rules()
        for probe in rule.probes
        if not finite(stack.prom.query(probe))
    ]


def no_gaps(gaps: list[str]) -> None:
    assert not gaps, "\n".join(gaps)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    require_java_tools("the Prometheus end-to-end test")
    workdir = tmp_path_factory.mktemp("prometheus-e2e")
    classpath = build_classpath("4.9")  # before the clock starts: Maven may download on a fresh machine
    metrics_port = free_port()
    with contextlib.ExitStack() as cleanup:
        server = cleanup.enter_context(MetricsServer(metrics_port, workdir=workdir / "server", grpc=True))
        prom = cleanup.enter_context(
            RunningPrometheus(workdir / "prometheus", targets=[f"127.0.0.1:{metrics_port}"], rule_files=[ALERTS])
        )
        prom.wait_for_targets_up()
        silent = SilentConsumer(server.namesrv, SILENT_GROUP, SLOW)
        cleanup.callback(silent.close)
        cleanup.callback(GrpcTraffic(server).close)
        traffic_log = workdir / "traffic.log"
        with open(traffic_log, "wb") as log:
            traffic = subprocess.Popen(
                ["java", "-cp", classpath, str(PROGRAM), server.namesrv, PREFIX],
                stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        cleanup.callback(_stop, traffic)
        s = Stack(prom, traffic, traffic_log)
        # Give everything time to have data (bounded); the tests below then say what is missing.
        with contextlib.suppress(AssertionError):
            eventually(lambda: no_gaps(panel_gaps(s) + probe_gaps(s)), timeout=s.remaining)
        s.seen["all data after s"] = round(time.monotonic() - s.started, 1)
        yield s
        print(f"\n{json.dumps(s.seen, indent=1)}")
        if os.environ.get("RMQ_METRICS_E2E_LOGS"):
            print(server.log_tail(), prom.log_tail(), traffic_log.read_text(errors="replace")[-3000:])


def _stop(traffic: subprocess.Popen) -> None:
    if traffic.poll() is None:
        traffic.stdin.close()
        try:
            traffic.wait(timeout=30)
        except subprocess.TimeoutExpired:
            traffic.kill()
            traffic.wait()


def test_every_dashboard_panel_expression_returns_data(stack: Stack) -> None:
    assert len(panel_targets()) > 30
    eventually(lambda: no_gaps(panel_gaps(stack)), timeout=stack.remaining)


def test_every_dashboard_variable_lists_values(stack: Stack) -> None:
    """``label_values(series, label)`` as Grafana runs it: the label's values on ``series``."""
    for stem, dashboard in dashboards().items():
        for variable in dashboard["templating"]["list"]:
            if variable["type"] != "query":
                continue
            series, label = re.fullmatch(r"label_values\((\w+), (\w+)\)", variable["definition"]).groups()
            values = stack.by(f"count by ({label}) ({series})", label)
            assert values, f"{stem}: variable {variable['name']} would list nothing"


def test_every_alert_rule_evaluates_and_its_probes_return_data(stack: Stack) -> None:
    """Thresholds removed, each rule's measurement has data; the full expressions evaluate."""
    eventually(lambda: no_gaps(probe_gaps(stack)), timeout=stack.remaining)
    for rule in alerts.rules():
        stack.prom.query(rule.expr)  # raises on a PromQL error; an empty result is a quiet rule
    loaded = {r["name"]: r for g in stack.prom.rule_groups() for r in g["rules"]}
    assert set(loaded) == {r.alert for r in alerts.rules()}
    assert all(r["health"] == "ok" and not r.get("lastError") for r in loaded.values()), loaded


def test_pull_path_numbers_are_plausible(stack: Stack) -> None:
    by_wake = "Hold time p50 / p99 by wake reason"
    latency = "Server pull latency p50 / p99, held vs not held"
    vs = "Client pull RT vs server pull latency"
    seen = stack.seen

    def check() -> None:
        seen["slow hold p50 s"] = stack.one(panel("pull-path", by_wake, topic=SLOW), wake="arrival")
        assert 1.0 <= seen["slow hold p50 s"] <= 4.5, "slow producer: 1 msg/s over 4 queues"
        seen["idle hold p50 s"] = stack.one(panel("pull-path", by_wake, topic=IDLE), wake="timeout")
        # 2 s lies in the (1, 2.5] bucket; histogram_quantile interpolates inside it
        assert 1.0 < seen["idle hold p50 s"] <= 2.5, "idle pulls ask for a 2 s suspend"

        seen["service p99 s"] = stack.one(panel("pull-path", "Service time p99 (alert on this)"))
        assert 0 < seen["service p99 s"] < 0.05
        seen["held p50 s"] = stack.one(panel("pull-path", latency, "A"), held="true")
        seen["not held p99 s"] = stack.one(panel("pull-path", latency, "B"), held="false")
        assert seen["not held p99 s"] < 0.05 < seen["held p50 s"]

        seen["slow client pull RT s"] = stack.one(panel("pull-path", vs, "A", topic=SLOW), group=PREFIX + "-push")
        seen["slow server mean s"] = stack.one(panel("pull-path", vs, "B", topic=SLOW), consumer_group=PREFIX + "-push")
        assert seen["slow server mean s"] >= 1.0
        assert 0.5 <= seen["slow client pull RT s"] / seen["slow server mean s"] <= 2, "client RT ~ server latency"

        seen["overshoot p50 s"] = stack.one(panel("pull-path", "Timeout overshoot p50 / p99", "A"))
        seen["overshoot p99 s"] = stack.one(panel("pull-path", "Timeout overshoot p50 / p99", "B"))
        assert 0 <= seen["overshoot p50 s"] <= seen["overshoot p99 s"] < 0.25

        seen["wakes /s"] = wakes = stack.by(panel("pull-path", "Wake reasons", **RECENT), "wake")
        assert wakes.get("arrival", 0) > 1 and 0.8 <= wakes.get("timeout", 0) <= 2.5  # 4 idle queues, 2 s holds
        seen["held share of cap"] = stack.one(panel("pull-path", "Held pulls of maxHeldPulls"))
        assert 8 <= seen["held share of cap"] * MAX_HELD_PULLS <= 40  # 4 slow and 4 idle queues at least
        idle = stack.one(panel("pull-path", "Held pulls by group and topic"), topic=IDLE)
        assert idle == 4

    eventually(check, timeout=stack.remaining)


def test_broker_overview_numbers_are_plausible(stack: Stack) -> None:
    seen = stack.seen

    def check() -> None:
        seen["in msg/s"] = rates = stack.by(panel("broker-overview", "Messages in / out per second", **RECENT), "topic")
        assert 0.7 <= rates[SLOW] <= 1.3 and 25 <= rates[BUSY] <= 55 and 6 <= rates[ORDERLY] <= 11
        lag = stack.values(panel("broker-overview", "Consumer lag"))
        assert lag and all(0 <= v < 200 for v in lag.values()), lag
        seen["retries /s"] = stack.one(panel("broker-overview", "Retries consumed", **RECENT))
        assert 1.5 <= seen["retries /s"] <= 7  # one busy message in ten, ~45 msg/s
        conns = stack.values(panel("broker-overview", "Consumer connections", "A"))
        assert {(dict(k)["consumer_group"], dict(k)["consume_mode"]): v for k, v in conns.items()} == {
            (PREFIX + "-push", "push"): 1, (PREFIX + "-busy", "push"): 1, (PREFIX + "-pull", "pull"): 1,
            (PREFIX + "-orderly", "push"): 2, (SILENT_GROUP, "push"): 1,
        }  # fmt: skip
        rpc = stack.by(panel("broker-overview", "Request latency p99 (not long polling)"), "request_code")
        seen["send p99 ms"] = rpc["send_message_v2"]
        assert 0 < seen["send p99 ms"] < 100, "rocketmq_rpc_latency is in ms"
        seen["flush p99 s"] = stack.one(panel("broker-overview", "Store flush (fsync) p50 / p99", "B"))
        assert 0 < seen["flush p99 s"] < 1
        failing = stack.by(panel("broker-overview", "Client stats requests failing", **RECENT), "group")
        failing = {g: v for g, v in failing.items() if v > 0}  # every polled group has a series, from 0
        seen["stats failures /s"] = failing
        assert list(failing) == [SILENT_GROUP] and 0.3 <= failing[SILENT_GROUP] <= 0.7  # one per 2 s poll
        reporting = stack.by(panel("broker-overview", "Consumers reporting client stats"), "group")
        assert reporting == {PREFIX + "-push": 1, PREFIX + "-busy": 1, PREFIX + "-orderly": 2}

    eventually(check, timeout=stack.remaining)


def test_orderly_and_lock_numbers_are_plausible(stack: Stack) -> None:
    group, seen = PREFIX + "-orderly", stack.seen

    def check() -> None:
        locked = stack.one(panel("orderly-locks", "Locked queues"), consumer_group=group)
        assert locked == 5, f"the 4 queues of {ORDERLY} and its retry queue, got {locked}"
        seen["handoffs"] = stack.one(panel("orderly-locks", "Lock handoffs (in 15m)"), consumer_group=group)
        assert seen["handoffs"] >= 2, "o2 joins, o1 leaves, o3 joins"
        # Handoffs are rare (a few per run): take the quantile over the whole run, not the last minute.
        seen["handoff p99 s"] = stack.one(panel("orderly-locks", "Lock handoff time p50 / p99", "B", **WHOLE_RUN))
        assert 0 <= seen["handoff p99 s"] < 5, "a freed queue is offered at once, not on the 20 s rebalance"
        requests = stack.values(panel("orderly-locks", "Lock requests by outcome"))
        outcomes = {(dict(k)["op"], dict(k)["outcome"]) for k in requests}
        assert {("lock", "granted"), ("unlock", "released")} <= outcomes, outcomes

    eventually(check, timeout=stack.remaining)


def test_clients_not_reporting_alerts_name_the_silent_consumer_only(stack: Stack) -> None:
    def check() -> None:
        active = {
            (a["labels"]["alertname"], a["state"], a["labels"].get("group") or a["labels"].get("consumer_group"))
            for a in stack.prom.alerts()
        }
        # ClientMetricsMissing waits 10 min (for:), so it is pending; the reporting push groups are not in it
        assert active == {
            ("RmqproxyClientStatsFailing", "firing", SILENT_GROUP),
            ("RmqproxyClientMetricsMissing", "pending", SILENT_GROUP),
        }

    eventually(check, timeout=stack.remaining)


def test_traffic_program_ran_without_errors(stack: Stack) -> None:
    stack.traffic.stdin.close()
    assert stack.traffic.wait(timeout=60) == 0, stack.traffic_log.read_text(errors="replace")[-4000:]
    output = stack.traffic_log.read_text(errors="replace")
    (line,) = [x for x in output.splitlines() if x.startswith("RESULT ")]
    result = json.loads(line[len("RESULT "):])
    assert result["errors"] == 0 and result["sent"] > 0 and result["orderly"] > 0 and result["idle_pulls"] > 0, result
    assert all(math.isfinite(v) for v in result.values())
