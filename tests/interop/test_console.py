"""The RocketMQ console's admin calls, made the way the console makes them by default (issue 36).

The console (apache/rocketmq-dashboard 2.1.0) builds its admin client with rocketmq-tools 5.3.3 (the
``rocketmq.version`` of its pom) as ``DefaultMQAdminExt`` with ``setVipChannelEnabled(true)``: its
``isVIPChannel`` is empty by default and read as true. Every broker call then goes to the broker
address's port - 2, the "fast" port every Apache broker listens on beside its main port. The
scenario program's ``adminshell``, built with the console's tools version, makes the console's calls
on such an admin client (``ConsoleCalls.java``, the ``console`` op) and answers each with the result as
plain JSON and the addresses the admin client holds connections to.

Targets (one server and one shell JVM each, kept for the module): ``rmqproxy serve``, the reference
4.9.7 broker, and ``rmqproxy proxy`` in front of the session's shared 4.9.7 cluster (two brokers).
Each has a topic T that a producer group (the shell's producer, kept connected) sent SEND_COUNT keyed
messages to, and a live push consumer of group G that consumed them. The same assertions hold for
every target, page by page: cluster, topic, consumer, producer, message, and the dashboard's
collectors. ``REFERENCE_GAPS`` names the calls the 4.9.7 reference cannot serve from the 5.x tools
(asserted as its refusal, then xfail); through the proxy those are the upstream's refusals.

Also: the admin's connections to the brokers go to port - 2, and the runtime info rmqproxy answers
carries every key the reference's does (path- and level-dependent keys compared by prefix), with TPS
figures that move when messages are sent.
"""

from __future__ import annotations

import concurrent.futures
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.needs import require_java_tools
from tests.proxy.proxied import ProxiedCluster

from .admin_shell import CONSOLE_TOOLS_VERSION, AdminShell, failure_text, poll
from .apache_cluster import ApacheCluster
from .scenario_checks import start_server
from .scenario_runner import ScenarioProgram, unique_name
from .server import ScenarioServer


SEND_COUNT = 16
BURST = 40

#: the proxy target uses the session's shared 4.9.7 cluster (tests/conftest.py ``apache_clusters``)
TARGETS = ["rmqproxy", "apache", pytest.param("proxy", marks=pytest.mark.apache_cluster("4.9.7"))]
ALL_TARGETS = pytest.mark.parametrize("target", TARGETS)

_NOT_SUPPORTED_351 = "request type 351 not supported"
#: console call -> why the reference 4.9.7 broker cannot serve it from the 5.3.3 tools (also through the proxy)
REFERENCE_GAPS: dict[str, str] = {
    "consumeStats": "5.x examineConsumeStats reads the config of each topic it reports with GET_TOPIC_CONFIG (351) "
                    "(MQAdminUtils.examineTopicConfigFromRoute): 'request type 351 not supported' on 4.9.x",
    "topicStats": "5.x examineTopicStats reads T's config on each broker with GET_TOPIC_CONFIG (351) after its stats "
                  "(MQAdminUtils.examineTopicConfigFromRoute): 'request type 351 not supported' on 4.9.x",
    "topicConfig": "5.x examineTopicConfig is GET_TOPIC_CONFIG (351): 'request type 351 not supported' on 4.9.x",
}  # fmt: skip

#: runtime info keys whose tail names a store path or a delay level: compared by the part before it
_VARIABLE_TAIL = re.compile(r"^(?P<prefix>.+?_)(?:/.*|\d+)$")


@dataclass
class Target:
    """One target: its server, the shell and what the set-up sent and started."""

    name: str
    server: ScenarioServer
    shell: AdminShell
    topic: str
    group: str
    producer_group: str
    keys: list[str]
    msg_ids: list[str]
    offset_msg_ids: list[str]
    client_id: str
    sent: int

    def attempt(self, call: str, timeout: float = 60, **fields: Any) -> dict[str, Any]:
        """The shell's reply to one console call: {result, channels} or {thrown, error_broker_code, channels}."""
        reply: dict[str, Any] = self.shell._request({"op": "console", "call": call, **fields}, timeout)
        shown = json.dumps(reply.get("result") if "thrown" not in reply else reply)
        self.shell.transcript.append(f"$ console {call} {json.dumps(fields)} ({reply.get('elapsed_ms')} ms)\n"
                                     f"{shown[:1500]}")  # fmt: skip
        return reply

    def call(self, call: str, **fields: Any) -> Any:
        """The result of a console call that must succeed."""
        reply = self.attempt(call, **fields)
        assert "thrown" not in reply, self.fail_text(f"console call {call} {fields} failed: {reply['thrown']}"
                                                     f" (broker code {reply.get('error_broker_code')})")  # fmt: skip
        return reply["result"]

    def masters(self) -> dict[str, str]:
        """Broker name -> master address, from the console's cluster info."""
        brokers = self.call("clusterInfo")["brokers"]
        return {name: b["addrs"]["0"] for name, b in brokers.items() if "0" in b["addrs"]}

    def reference(self) -> bool:
        """The reference broker, or the proxy in front of the reference cluster (its gaps are the upstream's)."""
        return self.server.name.startswith("apache")

    def fail_text(self, what: str) -> str:
        return failure_text(self, what)


def reference_gap(env: Target, call: str, reply: dict[str, Any]) -> None:
    """On the reference (or through the proxy to it), when ``call`` is a known gap: assert the refusal, then xfail."""
    if env.reference() and call in REFERENCE_GAPS:
        assert _NOT_SUPPORTED_351 in reply.get("thrown", ""), env.fail_text(f"expected the reference gap: {reply}")
        pytest.xfail(REFERENCE_GAPS[call])


def fast_port(addr: str) -> str:
    host, port = addr.rsplit(":", 1)
    return f"{host}:{int(port) - 2}"


def first_figure(value: str) -> float:
    """How the console reads a TPS field: ``value.split(" ")[0]`` parsed as a double."""
    return float(value.split(" ")[0])


class Targets:
    """The module's targets, each started when a test first asks for it and kept to the module's end."""

    def __init__(self, program: ScenarioProgram, apache_clusters: Callable[[str], ApacheCluster]) -> None:
        self.program = program
        self.apache_clusters = apache_clusters
        self.running: dict[str, Target] = {}
        self.failed: dict[str, str] = {}

    def get(self, name: str) -> Target:
        """The running target ``name``; one whose start failed fails each test that asks for it, without a retry."""
        if name in self.failed:
            pytest.fail(f"target {name} did not start: {self.failed[name]}", pytrace=False)
        if name not in self.running:
            try:
                self.running[name] = self._start(name)
            except Exception as e:
                self.failed[name] = f"{type(e).__name__}: {e}"[:4000]
                raise
        return self.running[name]

    def _server(self, name: str) -> ScenarioServer:
        if name == "proxy":
            return ProxiedCluster(self.apache_clusters("4.9.7"))
        return start_server(name)

    def _start(self, name: str) -> Target:
        server = self._server(name)
        shell = None
        try:
            topic, group, producer_group = unique_name("Con", name), unique_name("ConG", name), unique_name("ConP", name)
            shell = AdminShell(self.program, server.namesrv, producer_group=producer_group)
            sent = shell.op("send", topic=topic, count=SEND_COUNT, key_prefix=f"{topic}-key")
            assert sent["sent_ok"] == SEND_COUNT, f"set-up sends to {server.name} failed: {sent['errors']}"
            client_id = shell.op("consume", id="main", group=group, topic=topic)["client_id"]
            shell.wait_received("main", lambda r: all(k in r["keys"] for k in sent["keys"]), what="set-up consumer")
            return Target(name=name, server=server, shell=shell, topic=topic, group=group, producer_group=producer_group,
                          keys=sent["keys"], msg_ids=sent["msg_ids"], offset_msg_ids=sent["offset_msg_ids"],
                          client_id=client_id, sent=SEND_COUNT)  # fmt: skip
        except Exception:
            if shell is not None:
                shell.close()
            server.close()
            raise

    def close(self) -> None:
        """Stop every target's shell and server, the targets side by side (a shell takes seconds to stop)."""

        def stop(env: Target) -> None:
            try:
                env.shell.close()
            finally:
                env.server.close()

        with concurrent.futures.ThreadPoolExecutor(max(1, len(self.running))) as pool:
            stopped = [pool.submit(stop, env) for env in self.running.values()]
        self.running.clear()
        for f in stopped:
            f.result()


@pytest.fixture(scope="module")
def console_program(tmp_path_factory: pytest.TempPathFactory) -> ScenarioProgram:
    """The scenario program built with the console's rocketmq-tools version."""
    require_java_tools("the console's admin client")
    return ScenarioProgram(CONSOLE_TOOLS_VERSION, log_root=tmp_path_factory.mktemp("console"))


@pytest.fixture(scope="module")
def targets(console_program: ScenarioProgram, apache_clusters: Callable[[str], ApacheCluster]) -> Iterator[Targets]:
    running = Targets(console_program, apache_clusters)
    try:
        yield running
    finally:
        running.close()


@pytest.fixture
def env(target: str, targets: Targets) -> Target:
    return targets.get(target)


# -- the fast port -------------------------------------------------------------------------------------


@ALL_TARGETS
def test_admin_calls_go_to_the_fast_port(env: Target) -> None:
    """The VIP-channel admin reaches every master at its address's port - 2 (the call fails where nothing
    listens there), and finds there the broker the address names: a non-VIP admin's call to the address
    itself answers the same broker boot time."""
    masters = env.masters()
    assert masters, env.fail_text("no master in the cluster info")
    for name, addr in masters.items():
        reply = env.attempt("runtimeStats", addr=addr)
        assert "thrown" not in reply, env.fail_text(f"fetchBrokerRuntimeStats({addr}) of {name} on the VIP channel "
                                                    f"(port - 2) failed: {reply['thrown']}")  # fmt: skip
        assert fast_port(addr) in reply["channels"], env.fail_text(f"no connection to {fast_port(addr)}: {reply}")
        plain = env.attempt("runtimeStats", addr=addr, vip=False)
        assert "thrown" not in plain and addr in plain["channels"], env.fail_text(f"non-VIP call to {addr}: {plain}")
        boot = {reply["result"]["bootTimestamp"], plain["result"]["bootTimestamp"]}
        assert len(boot) == 1, env.fail_text(f"{name}: {fast_port(addr)} and {addr} answer different brokers (boot times {boot})")


# -- cluster page ----------------------------------------------------------------------------------------


@ALL_TARGETS
def test_cluster_page(env: Target) -> None:
    """ClusterServiceImpl.list: examineBrokerClusterInfo, then fetchBrokerRuntimeStats of every broker
    address; getBrokerConfig of a master."""
    info = env.call("clusterInfo")
    assert info["clusters"] and all(info["clusters"].values()), env.fail_text(f"cluster info {info}")
    listed = {name for names in info["clusters"].values() for name in names}
    assert listed == set(info["brokers"]), env.fail_text(f"clusters list {listed}, brokers {set(info['brokers'])}")
    if env.name == "proxy":
        assert set(info["brokers"]) == {"broker-a", "broker-b"}, env.fail_text(f"cluster info {info}")
    else:
        assert env.masters() == {name: env.server.broker_addr for name in info["brokers"]}, env.fail_text(f"{info}")
    puts_today = 0
    for name, broker in info["brokers"].items():
        for addr in broker["addrs"].values():
            table = env.call("runtimeStats", addr=addr)
            for key in ("brokerVersionDesc", "msgPutTotalTodayNow", "msgGetTotalTodayNow", "putTps", "getTotalTps"):
                assert key in table, env.fail_text(f"runtime stats of {name} ({addr}) lack {key}: {sorted(table)}")
            puts_today += int(table["msgPutTotalTodayNow"])
    assert puts_today >= SEND_COUNT, env.fail_text(f"the brokers count {puts_today} puts today")
    for name, addr in env.masters().items():
        config = env.call("brokerConfig", addr=addr)
        assert config.get("brokerName") == name, env.fail_text(f"broker config of {addr}: {config}")


# -- topic page ------------------------------------------------------------------------------------------


@ALL_TARGETS
def test_topic_page(env: Target) -> None:
    """TopicServiceImpl: fetchAllTopicList lists T; examineTopicRouteInfo; queryTopicConsumeByWho names G;
    getAllTopicConfig of every master of T's route holds T."""
    assert env.topic in env.call("topicList"), env.fail_text("T not in the topic list")
    route = env.call("topicRoute", topic=env.topic)
    assert route["brokers"] and route["queues"], env.fail_text(f"route {route}")
    assert env.group in env.call("consumeByWho", topic=env.topic), env.fail_text("G not among the topic's groups")
    for name in route["brokers"]:
        addr = env.masters()[name]
        assert env.topic in env.call("allTopicConfig", addr=addr), env.fail_text(f"T not in {name}'s topic configs")


def check_topic_stats(env: Target, queues: list[dict[str, Any]], brokers: set[str], what: str) -> None:
    """``queues`` (a topic stats table of T) covers ``brokers`` and counts every message sent to T."""
    assert queues and all(q["topic"] == env.topic for q in queues), env.fail_text(f"{what}: {queues}")
    assert {q["broker"] for q in queues} == brokers, env.fail_text(f"{what}: {queues} vs brokers {brokers}")
    total = sum(q["max"] - q["min"] for q in queues)
    assert total == env.sent, env.fail_text(f"{what} counts {total} messages, {env.sent} were sent: {queues}")
    assert all(q["last_update"] > 0 for q in queues if q["max"] > 0), env.fail_text(f"{what}: no last update time: {queues}")


@ALL_TARGETS
def test_topic_stats(env: Target) -> None:
    """The topic page's status: examineTopicStats(T) counts the messages sent to T (and so does
    GET_TOPIC_STATS_INFO of each master, which the 5.x call makes before it reads each broker's topic config)."""
    brokers = set(env.call("topicRoute", topic=env.topic)["brokers"])
    masters = env.masters()
    per_broker = [q for name in brokers for q in env.call("topicStatsOfBroker", addr=masters[name], topic=env.topic)]
    check_topic_stats(env, per_broker, brokers, "GET_TOPIC_STATS_INFO of each master")
    reply = env.attempt("topicStats", topic=env.topic)
    reference_gap(env, "topicStats", reply)
    assert "thrown" not in reply, env.fail_text(f"examineTopicStats failed: {reply}")
    check_topic_stats(env, reply["result"], brokers, "examineTopicStats")


@ALL_TARGETS
def test_topic_config(env: Target) -> None:
    """TopicServiceImpl.examineTopicConfig (the topic's "topic config" dialog): GET_TOPIC_CONFIG of T on a master."""
    name, addr = next(iter(env.masters().items()))
    reply = env.attempt("topicConfig", addr=addr, topic=env.topic)
    reference_gap(env, "topicConfig", reply)
    assert "thrown" not in reply, env.fail_text(f"examineTopicConfig failed: {reply}")
    config = reply["result"]
    assert config and config["topicName"] == env.topic and config["readQueueNums"] > 0, env.fail_text(f"{config}")


# -- consumer page ---------------------------------------------------------------------------------------


@ALL_TARGETS
def test_consumer_connection_and_subscription(env: Target) -> None:
    """ConsumerServiceImpl: examineConsumerConnectionInfo shows the live consumer and its subscription;
    getConsumerRunningInfo of that client (relayed to it by the broker); the group's subscription config
    (examineSubscriptionGroupConfig, and getAllSubscriptionGroup as the group list reads it);
    examineConsumeStats of one broker (the consumer detail)."""
    conn = env.call("consumerConnection", group=env.group)
    assert env.client_id in {c["clientId"] for c in conn["clients"]}, env.fail_text(f"live consumer not listed: {conn}")
    assert all(c["language"] == "JAVA" and c["version"] > 0 for c in conn["clients"]), env.fail_text(f"{conn}")
    assert env.topic in conn["subscriptions"], env.fail_text(f"T not subscribed: {conn}")
    assert (conn["consumeType"], conn["messageModel"]) == ("CONSUME_PASSIVELY", "CLUSTERING"), env.fail_text(f"{conn}")
    info = env.call("consumerRunningInfo", group=env.group, client_id=env.client_id)
    assert env.topic in info["subscriptions"] and info["queues"] > 0, env.fail_text(f"running info {info}")
    for name, addr in env.masters().items():
        config = env.call("subscriptionGroup", addr=addr, group=env.group)
        assert config and config["groupName"] == env.group and config["consumeEnable"], env.fail_text(f"{name}: {config}")
        assert env.group in env.call("allSubscriptionGroups", addr=addr), env.fail_text(f"G not in {name}'s groups")
    # the consumer commits its offsets every second, the first time 10 s after it started
    for name in env.call("topicRoute", topic=env.topic)["brokers"]:
        poll(env, f"examineConsumeStats of {name}: G's offsets of T", lambda: env.call(
            "consumeStatsOfBroker", addr=env.masters()[name], group=env.group),
            lambda stats: any(q["topic"] == env.topic for q in stats["queues"]))


@ALL_TARGETS
def test_consumer_group_stats(env: Target) -> None:
    """ConsumerServiceImpl.queryGroup: examineConsumeStats(G) covers T's queues and reaches a diff of 0
    once the live consumer committed."""
    reply = env.attempt("consumeStats", group=env.group)
    reference_gap(env, "consumeStats", reply)

    def probe() -> dict[str, Any]:
        return dict(env.call("consumeStats", group=env.group, topic=env.topic))

    stats = poll(env, "examineConsumeStats: G caught up on T", probe,
                 lambda s: any(q["topic"] == env.topic for q in s["queues"]) and s["diff_total"] == 0)
    mine = [q for q in stats["queues"] if q["topic"] == env.topic]
    assert sum(q["broker_offset"] for q in mine) == env.sent, env.fail_text(f"consume stats {stats}")


# -- producer page ---------------------------------------------------------------------------------------


@ALL_TARGETS
def test_producer_page(env: Target) -> None:
    """ProducerServiceImpl: examineProducerConnectionInfo(PG, T) lists the connected producer."""
    clients = env.call("producerConnection", group=env.producer_group, topic=env.topic)
    assert clients and all(c["language"] == "JAVA" for c in clients), env.fail_text(f"producer connection {clients}")


# -- message page ----------------------------------------------------------------------------------------


@ALL_TARGETS
def test_message_page(env: Target) -> None:
    """MessageServiceImpl: queryMessage by key finds the sent message; viewMessage by its message id
    (the console's own unique-key query, and DefaultMQAdminExt.viewMessage by the id and by the offset id)."""
    i = SEND_COUNT // 2
    key, msg_id, offset_id = env.keys[i], env.msg_ids[i], env.offset_msg_ids[i]
    found = poll(env, f"queryMessage by key {key}", lambda: env.call("queryMessageByKey", topic=env.topic, key=key),
                 lambda msgs: any(m["keys"] == key for m in msgs))
    assert {m["msg_id"] for m in found if m["keys"] == key} == {msg_id}, env.fail_text(f"by key: {found}")
    assert all(m["body"] == key and m["topic"] == env.topic for m in found), env.fail_text(f"by key: {found}")
    console = env.call("viewMessageAsConsole", topic=env.topic, msg_id=msg_id)
    assert console and console["keys"] == key and console["body"] == key, env.fail_text(f"console view: {console}")
    for mid in (msg_id, offset_id):
        viewed = env.call("viewMessage", topic=env.topic, msg_id=mid)
        assert viewed and viewed["keys"] == key and viewed["body"] == key, env.fail_text(f"viewMessage {mid}: {viewed}")


# -- dashboard -------------------------------------------------------------------------------------------


@ALL_TARGETS
def test_tps_moves_with_traffic(env: Target) -> None:
    """After a burst of BURST sends (which G consumes), the brokers' ``msgPutTotalTodayNow`` grew by BURST,
    their ``putTps`` (10 s figure) adds up to at least half of BURST / 10 s and ``getTotalTps`` is above 0,
    as the console reads them."""
    masters = list(env.masters().values())
    puts_before = sum(int(env.call("runtimeStats", addr=addr)["msgPutTotalTodayNow"]) for addr in masters)
    burst = env.shell.op("send", topic=env.topic, count=BURST, key_prefix=f"burst-{env.topic}")
    assert burst["sent_ok"] == BURST, env.fail_text(f"burst sends failed: {burst['errors']}")
    env.sent += BURST
    env.shell.wait_received("main", lambda r: all(k in r["keys"] for k in burst["keys"]), what="burst consumer")

    def probe() -> dict[str, dict[str, str]]:
        return {addr: env.call("runtimeStats", addr=addr) for addr in masters}

    def moved(tables: dict[str, dict[str, str]]) -> bool:
        put = sum(first_figure(t["putTps"]) for t in tables.values() if t["putTps"].split(" ")[0])
        get = sum(first_figure(t["getTotalTps"]) for t in tables.values() if t["getTotalTps"].split(" ")[0])
        return put >= BURST / 10 / 2 and get > 0

    tables = poll(env, "putTps and getTotalTps after the burst", probe, moved, timeout=20)
    puts_after = sum(int(t["msgPutTotalTodayNow"]) for t in tables.values())
    assert puts_after - puts_before >= BURST, env.fail_text(f"msgPutTotalTodayNow {puts_before} -> {puts_after}")
    for addr, t in tables.items():
        for key in ("putTps", "getTotalTps"):
            assert all(float(f) >= 0 for f in t[key].split(" ") if f), env.fail_text(f"{addr} {key}={t[key]!r}")


@ALL_TARGETS
def test_dashboard_broker_collector(env: Target) -> None:
    """DashboardCollectTask.collectBroker (every minute in the console): the figures of each broker's
    ``getTotalTps`` as BigDecimals, their average; ``getTotalTps`` and ``putTps`` read with
    ``.split(" ")[0]`` as a double. A broker up less than 10 s leaves its 10 s figure empty (the reference's
    StoreStatsService: no sample 10 s back yet) and the console's reading throws, so the collector is
    retried until the broker has 10 s of samples."""

    def probe() -> dict[str, Any]:
        return env.attempt("collectBroker")

    collected = poll(env, "the dashboard's broker collector", probe, lambda reply: "thrown" not in reply)["result"]
    assert set(collected) == set(env.masters().values()), env.fail_text(f"collected {collected}")
    for addr, row in collected.items():
        assert float(row["averageTps"]) >= 0 and row["getTotalTps"] >= 0 and row["putTps"] >= 0, \
            env.fail_text(f"{addr}: {row}")


@ALL_TARGETS
def test_dashboard_topic_collector(env: Target) -> None:
    """CollectTaskRunnble (the dashboard's per-topic collector): viewBrokerStatsData TOPIC_PUT_NUMS of T
    and GROUP_GET_NUMS of T@G on every master of T's route answer; the day's puts reach what was sent to
    the broker once the broker sampled them."""
    route = env.call("topicRoute", topic=env.topic)
    masters = env.masters()
    addrs = [masters[name] for name in route["brokers"]]

    def probe() -> list[dict[str, Any]]:
        return [env.call("brokerStatsData", addr=a, stats_name="TOPIC_PUT_NUMS", stats_key=env.topic) for a in addrs]

    puts = poll(env, "TOPIC_PUT_NUMS of T", probe, lambda data: sum(d["minute"]["sum"] for d in data) >= SEND_COUNT,
                timeout=30)
    assert all(d[p]["sum"] >= 0 and d[p]["tps"] >= 0 for d in puts for p in ("minute", "hour", "day")), \
        env.fail_text(f"{puts}")
    for a in addrs:
        got = env.call("brokerStatsData", addr=a, stats_name="GROUP_GET_NUMS", stats_key=f"{env.topic}@{env.group}")
        assert all(got[p]["sum"] >= 0 for p in ("minute", "hour", "day")), env.fail_text(f"{a}: {got}")


# -- the runtime info's keys -----------------------------------------------------------------------------


def key_shapes(table: dict[str, str]) -> set[str]:
    """The keys of a runtime info table, each key whose tail is a store path or a number cut to its prefix + "*"."""
    shapes = set()
    for key in table:
        m = _VARIABLE_TAIL.match(key)
        shapes.add(f"{m.group('prefix')}*" if m else key)
    return shapes


def test_runtime_info_has_every_key_of_the_reference(targets: Targets) -> None:
    """Every key of the reference 4.9.7 broker's GET_BROKER_RUNTIME_INFO answer is in rmqproxy serve's
    (``commitLogDiskRatio_/path`` and ``scheduleMessageOffset_N`` by prefix); the TPS fields parse as the
    console parses them. (The proxy relays the upstream broker's answer.)"""
    reference = targets.get("apache")
    env = targets.get("rmqproxy")
    ref_table = reference.call("runtimeStats", addr=reference.server.broker_addr)
    for name, addr in env.masters().items():
        table = env.call("runtimeStats", addr=addr)
        missing = sorted(key_shapes(ref_table) - key_shapes(table))
        assert not missing, env.fail_text(f"runtime info of {name} ({addr}) lacks {len(missing)} of the reference's "
                                          f"{len(key_shapes(ref_table))} keys: {missing}\nreference: {ref_table}\n"
                                          f"{env.name}: {table}")  # fmt: skip
        for key in ("putTps", "getTotalTps", "getFoundTps", "getMissTps", "getTransferedTps"):
            assert all(float(f) >= 0 for f in table[key].split(" ") if f), env.fail_text(f"{key}={table[key]!r}")
