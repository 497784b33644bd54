"""Real mqadmin against rmqproxy and the reference broker: what each command prints, and what it does.

Issue 30. For each client line ("4.9": rocketmq-tools 4.9.7, "5": 5.3.1; ``admin_shell.TOOLS_LINES``)
and each target (rmqproxy, the reference 4.9.7 broker) one ``adminshell`` JVM runs every command of
the module through ``MQAdminStartup.main0`` and drives the live producer and push consumers the
commands need (its own client of the tools' version). The same assertions hold for both targets.

``APACHE_GAPS`` names what the reference cannot do on a line (5.x tools calling a code 4.9.7 lacks):
there the test asserts the reference's refusal and is reported as xfail.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.needs import require_java_tools

from .admin_shell import TOOLS_LINES, AdminShell, failure_text, poll
from .scenario_checks import reference_gap, servers_fixture
from .scenario_runner import ScenarioProgram, unique_name
from .server import ScenarioServer

server = servers_fixture("rmqproxy", "apache")

#: (line, test) -> why the reference 4.9.7 broker cannot serve it; asserted as a refusal, then xfail.
APACHE_GAPS: dict[tuple[str, str], str] = {
    ("5", "cloneGroupOffset"): "5.x cloneGroupOffset reads the source group's consume stats, which first calls "
                               "GET_TOPIC_CONFIG (351): 'request type 351 not supported' on 4.9.x",
}

SETUP_COUNT = 20
STATS_COUNT = 50


@dataclass
class Env:
    """One (client line, target) run: the server, the shell, and the names the tests share."""

    server: ScenarioServer
    shell: AdminShell
    line: str
    topic: str
    group: str
    producer_group: str
    stats_topic: str
    stats_group: str
    broker_name: str
    before_sends_ms: int
    keys: list[str]
    msg_ids: list[str]
    offset_msg_ids: list[str]
    client_id: str
    tmp: Path
    extra: dict[str, Any] = field(default_factory=dict)

    def mqadmin(self, *args: str, timeout: float = 60) -> dict[str, Any]:
        return self.shell.mqadmin(*args, timeout=timeout)

    def topic_option(self) -> tuple[str, ...]:
        """queryMsgById's -t T: 5.x requires it, 4.9.x does not declare it."""
        return ("-t", self.topic) if self.line == "5" else ()

    def fail_text(self, what: str) -> str:
        return failure_text(self, what)


@pytest.fixture(scope="module", params=list(TOOLS_LINES), ids=lambda line: f"tools-{TOOLS_LINES[line]}")
def tools_line(request: pytest.FixtureRequest) -> str:
    """The client line: "4.9" (rocketmq-tools 4.9.7) or "5" (5.3.1)."""
    require_java_tools("mqadmin")
    return str(request.param)


@pytest.fixture(scope="module")
def tools_program(tools_line: str, tmp_path_factory: pytest.TempPathFactory) -> ScenarioProgram:
    """The scenario program built with the rocketmq-tools version the issue names for the line."""
    return ScenarioProgram(TOOLS_LINES[tools_line], log_root=tmp_path_factory.mktemp(f"mqadmin-{tools_line}"))


@pytest.fixture(scope="module")
def env(server: ScenarioServer, tools_line: str, tools_program: ScenarioProgram,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    """A shell on ``server``; topic T holds SETUP_COUNT messages that group G (live) has consumed."""
    line = tools_line
    topic, group = unique_name("Adm", line), unique_name("AdmG", line)
    producer_group = unique_name("AdmP", line)
    shell = AdminShell(tools_program, server.namesrv, producer_group=producer_group)
    try:
        before = int(time.time() * 1000) - 1000
        sent = shell.op("send", topic=topic, count=SETUP_COUNT)
        assert sent["sent_ok"] == SETUP_COUNT, f"set-up sends failed: {sent['errors']}"
        broker_name = next(iter(sent["queues"])).split(":")[0]
        client_id = shell.op("consume", id="main", group=group, topic=topic)["client_id"]
        stats_topic, stats_group = unique_name("AdmS", line), unique_name("AdmSG", line)
        # the reference counts from a stats item's first 10 s sample on: create the items early
        assert shell.op("send", topic=stats_topic, count=1, key_prefix="warmup")["sent_ok"] == 1
        shell.op("consume", id="stats", group=stats_group, topic=stats_topic)
        shell.wait_received("main", lambda r: len(r["keys"]) >= SETUP_COUNT, what="set-up consumer")
        yield Env(server=server, shell=shell, line=line, topic=topic, group=group, producer_group=producer_group,
                  stats_topic=stats_topic, stats_group=stats_group, broker_name=broker_name,
                  before_sends_ms=before, keys=sent["keys"], msg_ids=sent["msg_ids"],
                  offset_msg_ids=sent["offset_msg_ids"], client_id=client_id,
                  tmp=tmp_path_factory.mktemp("mqadmin-export"))
    finally:
        shell.close()


def text(reply: dict[str, Any]) -> str:
    """Everything a command printed (and what it threw)."""
    return f"{reply.get('stdout', '')}{reply.get('stderr', '')}{reply.get('thrown') or ''}"


def ran(env: Env, reply: dict[str, Any], what: str = "") -> str:
    """The stdout of a command that succeeded (no exception printed or thrown)."""
    failed = reply.get("thrown") or "Exception" in reply.get("stderr", "") or "command failed" in reply.get("stdout", "")
    own = re.findall(r"^(?:Caused by: )?\S+(?:Exception|Error): .*", f"{reply.get('stderr', '')}\n{reply.get('thrown') or ''}",
                     re.M)
    assert not failed, env.fail_text(f"mqadmin {' '.join(reply.get('args', []))} failed {what}\n" + "\n".join(own[:10]))
    return str(reply["stdout"])


def apache_gap(env: Env, name: str, reply: dict[str, Any]) -> None:
    """On the reference, when ``name`` is a known gap on this line: assert the refusal, then xfail."""
    if not env.server.name.startswith("apache"):
        return
    gap = APACHE_GAPS.get((env.line, name)) or reference_gap(env.server, env.line, name)
    if gap:
        assert "not supported" in text(reply), env.fail_text(f"expected the reference gap ({gap})")
        pytest.xfail(gap)


def rows_of(stdout: str, first: str) -> list[list[str]]:
    """Whitespace-split rows of a table whose first column is ``first``."""
    return [ln.split() for ln in stdout.splitlines() if ln.split()[:1] == [first]]


def route(env: Env, topic: str) -> dict[str, Any]:
    """topicRoute's JSON (fastjson prints integer map keys bare: quoted here first)."""
    out = ran(env, env.mqadmin("topicRoute", "-t", topic))
    return dict(json.loads(re.sub(r"([{,])(\d+):", r'\1"\2":', out)))


def caught_up(env: Env, topic: str, group: str) -> list[list[str]]:
    """Wait until brokerConsumeStats (317) shows ``group``'s committed offset at the end of every queue of
    ``topic`` (the live consumer commits every second); its rows for them."""
    queues = route(env, topic)["queueDatas"][0]["readQueueNums"]

    def probe() -> list[list[str]]:
        out = ran(env, env.mqadmin("brokerConsumeStats", "-b", env.server.broker_addr))
        return [row for row in rows_of(out, topic) if len(row) >= 7 and row[1] == group]

    return list(poll(env, f"brokerConsumeStats: {group} at the end of every queue of {topic}", probe,
                     lambda rows: sorted(int(r[3]) for r in rows) == list(range(queues)) and all(r[6] == "0" for r in rows)))


def fresh_consumer_gets_only_marker(env: Env, group: str, cid: str, unwanted: list[str]) -> None:
    """A new consumer of ``group`` on T receives a marker sent now and none of ``unwanted``."""
    env.shell.op("consume", id=cid, group=group, topic=env.topic)
    try:
        marker = env.shell.op("send", topic=env.topic, count=1, key_prefix=f"marker-{cid}")["keys"][0]
        got = env.shell.wait_received(cid, lambda r: marker in r["keys"], what=f"{cid} consumer of {group}")
        again = sorted(set(got["keys"]) & set(unwanted))
        assert not again, env.fail_text(f"{group} consumed {len(again)} messages its offsets had passed: {again[:5]}")
    finally:
        env.shell.op("stop", id=cid)


# -- what works today -------------------------------------------------------------------------------


def test_shell_survives_argument_errors(env: Env) -> None:
    """A command line mqadmin would exit on (a missing required option, -h) is refused, and the shell goes on."""
    for args in (("updateTopic", "-t", "X"), ("topicRoute", "-t", "X", "-h"), ("noSuchCommand",)):
        reply = env.mqadmin(*args)
        assert "argument error (not run)" in str(reply.get("thrown")), env.fail_text(f"{args}: {reply}")
    assert env.broker_name in ran(env, env.mqadmin("clusterList"))


def test_cluster_list(env: Env) -> None:
    """clusterList: the broker's name and address."""
    out = ran(env, env.mqadmin("clusterList"))
    assert env.broker_name in out and env.server.broker_addr in out, env.fail_text("broker not listed")


def test_topic_list_route_status(env: Env) -> None:
    """topicList lists T; topicRoute points at the broker; topicStatus counts the messages of T."""
    assert env.topic in ran(env, env.mqadmin("topicList")).split(), env.fail_text("T not listed")
    r = route(env, env.topic)
    assert [b["brokerName"] for b in r["brokerDatas"]] == [env.broker_name]
    assert list(r["brokerDatas"][0]["brokerAddrs"].values()) == [env.server.broker_addr]
    reply = env.mqadmin("topicStatus", "-t", env.topic)
    apache_gap(env, "topicStatus", reply)
    rows = [row for row in rows_of(ran(env, reply), env.broker_name) if len(row) >= 4]
    assert sum(int(row[3]) - int(row[2]) for row in rows) >= SETUP_COUNT, env.fail_text("topicStatus total")


def test_update_and_delete_topic(env: Env) -> None:
    """updateTopic creates a routable topic with the asked queue counts; deleteTopic removes its route."""
    t = unique_name("AdmNew", env.line)
    out = ran(env, env.mqadmin("updateTopic", "-c", "DefaultCluster", "-t", t, "-r", "4", "-w", "4"))
    assert "success" in out and t in out
    assert route(env, t)["queueDatas"][0]["writeQueueNums"] == 4
    out = ran(env, env.mqadmin("deleteTopic", "-c", "DefaultCluster", "-t", t))
    assert "success" in out
    gone = env.mqadmin("topicRoute", "-t", t)
    assert "No topic route info" in text(gone) or "TOPIC_NOT_EXIST" in text(gone), env.fail_text("route still served")


def test_broker_status_and_config(env: Env) -> None:
    """brokerStatus prints the broker's runtime table; getBrokerConfig its configuration."""
    out = ran(env, env.mqadmin("brokerStatus", "-b", env.server.broker_addr))
    assert re.search(r"^brokerVersionDesc\s*:", out, re.M), env.fail_text("no brokerVersionDesc")
    out = ran(env, env.mqadmin("getBrokerConfig", "-b", env.server.broker_addr))
    assert re.search(rf"^brokerName\s*=\s*{re.escape(env.broker_name)}\s*$", out, re.M), env.fail_text("no brokerName")


def test_query_msg_by_id_and_key(env: Env) -> None:
    """queryMsgById shows the message; queryMsgByKey lists its unique id."""
    out = ran(env, env.mqadmin("queryMsgById", *env.topic_option(), "-i", env.offset_msg_ids[0]))
    assert re.search(rf"Topic:\s+{env.topic}\b", out) and f"[{env.keys[0]}]" in out, env.fail_text("message not shown")
    out = ran(env, env.mqadmin("queryMsgByKey", "-t", env.topic, "-k", env.keys[0]))
    assert env.msg_ids[0] in out, env.fail_text("id not listed")


def test_consumer_connection_and_progress(env: Env) -> None:
    """consumerConnection shows the live consumer; consumerProgress a Diff Total of 0 for G."""
    out = ran(env, env.mqadmin("consumerConnection", "-g", env.group))
    assert env.client_id in out and re.search(rf"^{re.escape(env.topic)}\s+\*", out, re.M), env.fail_text("connection")
    first = env.mqadmin("consumerProgress", "-g", env.group)
    apache_gap(env, "consumerProgress", first)
    poll(env, "consumerProgress Diff Total: 0", lambda: ran(env, env.mqadmin("consumerProgress", "-g", env.group)),
         lambda out: re.search(r"Diff Total:\s*0\b", out) is not None and env.topic in out)


# -- producers, offsets, messages ----------------------------------------------------------------------


def test_producer_connection(env: Env) -> None:
    """producerConnection (204) lists the shell's live producer."""
    out = ran(env, env.mqadmin("producerConnection", "-g", env.producer_group, "-t", env.topic))
    assert re.search(r"^\d{4}\s+\S+@\S+\s+\S+:\d+\s+JAVA\s+V\d", out, re.M), env.fail_text("no producer row")


def test_clone_group_offset(env: Env) -> None:
    """cloneGroupOffset (314): a new group given G's offsets skips what G consumed."""
    caught_up(env, env.topic, env.group)
    dest = unique_name("AdmClone", env.line)
    reply = env.mqadmin("cloneGroupOffset", "-s", env.group, "-d", dest, "-t", env.topic, "-o", "true")
    apache_gap(env, "cloneGroupOffset", reply)
    out = ran(env, reply)
    assert "success" in out, env.fail_text("no success line")
    fresh_consumer_gets_only_marker(env, dest, "clone", env.keys)


def test_query_msg_by_id_consume_directly(env: Env) -> None:
    """queryMsgById -g G -d CLIENTID (309): the live consumer consumes the message directly."""
    key, before = env.keys[1], env.shell.op("received", id="main")["keys"].get(env.keys[1], 0)
    out = ran(env, env.mqadmin("queryMsgById", *env.topic_option(), "-i", env.offset_msg_ids[1], "-g", env.group,
                               "-d", env.client_id))
    assert "CR_SUCCESS" in out or "CONSUME_SUCCESS" in out, env.fail_text("no consume result")
    env.shell.wait_received("main", lambda r: r["keys"].get(key, 0) > before, what="direct consume")


def test_query_cq(env: Env) -> None:
    """queryCq (321): the consume-queue entries of queue 0 of T."""
    queue_id = "0"
    out = ran(env, env.mqadmin("queryCq", "-t", env.topic, "-q", queue_id, "-i", "0", "-c", "5",
                               "-b", env.server.broker_addr))
    m = re.search(r"max:\s*(\d+),\s*min:\s*(\d+)", out)
    assert m and int(m.group(1)) > int(m.group(2)), env.fail_text("no max/min")
    entries = re.findall(r"physicOffset=(\d+), physicSize=(\d+)", out)
    assert len(entries) == min(5, int(m.group(1)) - int(m.group(2))) and all(int(s) > 0 for _, s in entries), \
        env.fail_text("entries")


def test_reset_offset_by_time_live_consumer(env: Env) -> None:
    """resetOffsetByTime (222 -> 220 to the live client): G consumes T again from before the set-up sends."""
    caught_up(env, env.topic, env.group)  # the reference refuses a reset while a queue has no committed offset
    before = env.shell.op("received", id="main")["keys"]
    out = ran(env, env.mqadmin("resetOffsetByTime", "-g", env.group, "-t", env.topic, "-s", str(env.before_sends_ms)))
    assert re.search(rf"^{re.escape(env.broker_name)}\s+\d+\s+0\s*$", out, re.M), env.fail_text("no offset-0 rows")
    env.shell.wait_received("main", lambda r: all(r["keys"].get(k, 0) > before.get(k, 0) for k in env.keys),
                            what="redelivery after reset")


def test_skip_accumulated_offline_group(env: Env) -> None:
    """skipAccumulatedMessage for a group with no online consumer (222 answered 206, then per-queue offsets):
    its next consumer starts after the skipped messages."""
    group = unique_name("AdmSkip", env.line)
    env.shell.op("consume", id="skip1", group=group, topic=env.topic)
    env.shell.wait_received("skip1", lambda r: all(k in r["keys"] for k in env.keys), what="skip1")
    env.shell.op("stop", id="skip1")
    skipped = env.shell.op("send", topic=env.topic, count=5, key_prefix=f"skipped-{group}")["keys"]
    out = ran(env, env.mqadmin("skipAccumulatedMessage", "-g", group, "-t", env.topic))
    assert env.broker_name in out, env.fail_text("no queue rows")
    fresh_consumer_gets_only_marker(env, group, "skip2", skipped)


# -- subscription groups -------------------------------------------------------------------------------


def test_sub_group_create_and_delete(env: Env) -> None:
    """updateSubGroup (200) with every option; getConsumerConfig (201/352) shows them; deleteSubGroup (207)."""
    g = unique_name("AdmSub", env.line)
    out = ran(env, env.mqadmin("updateSubGroup", "-c", "DefaultCluster", "-g", g, "-s", "true", "-m", "true",
                               "-d", "true", "-q", "2", "-r", "3", "-i", "0", "-w", "1", "-a", "false"))
    assert "success" in out, env.fail_text("no success line")
    out = ran(env, env.mqadmin("getConsumerConfig", "-g", g))
    want = {"groupName": g, "consumeEnable": "true", "consumeFromMinEnable": "true", "consumeBroadcastEnable": "true",
            "retryQueueNums": "2", "retryMaxTimes": "3", "brokerId": "0", "notifyConsumerIdsChangedEnable": "false"}
    for k, v in want.items():
        assert re.search(rf"^{k}\s*=\s*{re.escape(v)}\s*$", out, re.M), env.fail_text(f"getConsumerConfig: {k} != {v}")
    out = ran(env, env.mqadmin("deleteSubGroup", "-c", "DefaultCluster", "-g", g))
    assert re.search(rf"delete subscription group \[{g}\].*success", out), env.fail_text("no delete line")
    assert g not in ran(env, env.mqadmin("getConsumerConfig", "-g", g)), env.fail_text("still configured")


def test_consume_enable_false_stops_consuming(env: Env) -> None:
    """updateSubGroup -s false: G's live consumer gets nothing new; -s true again: it gets the messages."""
    ran(env, env.mqadmin("updateSubGroup", "-c", "DefaultCluster", "-g", env.group, "-s", "false"))
    try:
        keys = env.shell.op("send", topic=env.topic, count=3, key_prefix="disabled")["keys"]
        time.sleep(3)
        got = env.shell.op("received", id="main")["keys"]
        assert not [k for k in keys if k in got], env.fail_text("consumed while consumeEnable=false")
    finally:
        ran(env, env.mqadmin("updateSubGroup", "-c", "DefaultCluster", "-g", env.group, "-s", "true"))
    env.shell.wait_received("main", lambda r: all(k in r["keys"] for k in keys), what="after consumeEnable=true")


def test_retry_max_times_then_dlq(env: Env) -> None:
    """A group with retryMaxTimes 1 (and a client whose maxReconsumeTimes is 1: the Java client's own limit
    travels with each send-back and wins on the reference): delivered twice, then in %DLQ%G."""
    topic, group = unique_name("AdmRetry", env.line), unique_name("AdmDlq", env.line)
    ran(env, env.mqadmin("updateSubGroup", "-c", "DefaultCluster", "-g", group, "-r", "1"))
    assert re.search(r"^retryMaxTimes\s*=\s*1\s*$", ran(env, env.mqadmin("getConsumerConfig", "-g", group)), re.M)
    sent = env.shell.op("send", topic=topic, count=1, key_prefix="dlq")
    key, msg_id = sent["keys"][0], sent["msg_ids"][0]
    env.shell.op("consume", id="dlq", group=group, topic=topic, fail=True, max_reconsume=1)
    try:
        poll(env, f"{key} in %DLQ%{group}", lambda: text(env.mqadmin("queryMsgByKey", "-t", f"%DLQ%{group}", "-k", key)),
             lambda out: msg_id in out, timeout=30)
        got = env.shell.op("received", id="dlq")
        assert got["keys"].get(key) == 2 and got["reconsume"].get(key) == 1, env.fail_text(f"deliveries {got}")
    finally:
        env.shell.op("stop", id="dlq")


# -- configuration ---------------------------------------------------------------------------------------


def test_update_broker_config(env: Env) -> None:
    """updateBrokerConfig (25), then getBrokerConfig shows the new value."""
    out = ran(env, env.mqadmin("updateBrokerConfig", "-b", env.server.broker_addr, "-k", "fileReservedTime", "-v", "48"))
    assert "success" in out, env.fail_text("no success line")
    out = ran(env, env.mqadmin("getBrokerConfig", "-b", env.server.broker_addr))
    assert re.search(r"^fileReservedTime\s*=\s*48\s*$", out, re.M), env.fail_text("value not shown")


def test_namesrv_config(env: Env) -> None:
    """getNamesrvConfig (318) and updateNamesrvConfig (319): orderMessageEnable becomes true."""
    ran(env, env.mqadmin("getNamesrvConfig"))
    out = ran(env, env.mqadmin("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true"))
    assert "success" in out, env.fail_text("no success line")
    out = ran(env, env.mqadmin("getNamesrvConfig"))
    assert re.search(r"^orderMessageEnable\s*=\s*true\s*$", out, re.M), env.fail_text("not updated")


def test_order_conf_and_kv_config(env: Env) -> None:
    """updateTopic -o true, updateKvConfig, updateOrderConf and deleteKvConfig (100/101/102) change the
    orderTopicConf that topicRoute shows (the name server adds it while orderMessageEnable is true)."""
    ran(env, env.mqadmin("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true"))
    t, b = unique_name("AdmOrder", env.line), env.broker_name
    out = ran(env, env.mqadmin("updateTopic", "-c", "DefaultCluster", "-t", t, "-o", "true", "-r", "8", "-w", "8"))
    assert f"orderConf=[{b}:8]" in out, env.fail_text("no orderConf line")
    assert route(env, t).get("orderTopicConf") == f"{b}:8", env.fail_text("route lacks orderTopicConf")
    out = ran(env, env.mqadmin("updateKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", t, "-v", f"{b}:2"))
    assert "success" in out
    assert route(env, t).get("orderTopicConf") == f"{b}:2"
    out = ran(env, env.mqadmin("updateOrderConf", "-t", t, "-m", "get"))
    assert f"orderConf=[{b}:2]" in out, env.fail_text("updateOrderConf get")
    ran(env, env.mqadmin("updateOrderConf", "-t", t, "-m", "put", "-v", f"{b}:3"))
    assert route(env, t).get("orderTopicConf") == f"{b}:3"
    out = ran(env, env.mqadmin("deleteKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", t))
    assert "success" in out
    assert "orderTopicConf" not in route(env, t), env.fail_text("orderTopicConf still in the route")


def test_export_metadata(env: Env) -> None:
    """exportMetadata (21 and the groups): a metadata.json holding T and G."""
    out_dir = env.tmp / f"export-{env.line}-{env.server.name}"
    ran(env, env.mqadmin("exportMetadata", "-c", "DefaultCluster", "-f", str(out_dir)))
    data = json.loads((out_dir / "metadata.json").read_text())
    assert env.topic in data["topicConfigTable"], env.fail_text("T not exported")
    assert env.group in data["subscriptionGroupTable"], env.fail_text("G not exported")


# -- permissions and cleaning ---------------------------------------------------------------------------


def test_write_perm(env: Env) -> None:
    """wipeWritePerm (205): sends with a fresh route fail; addWritePerm (327): they work again."""
    out = ran(env, env.mqadmin("wipeWritePerm", "-b", env.broker_name))
    try:
        assert re.search(rf"wipe write perm of broker\[{env.broker_name}\].* OK, \d+", out), env.fail_text("no OK line")
        assert route(env, env.topic)["queueDatas"][0]["perm"] & 2 == 0, env.fail_text("route still writable")
        r = env.shell.op("send", topic=env.topic, count=1, key_prefix="wiped")
        assert r["sent_ok"] == 0, env.fail_text(f"send accepted after wipeWritePerm: {r}")
    finally:
        out = ran(env, env.mqadmin("addWritePerm", "-b", env.broker_name))
    assert re.search(rf"add write perm of broker\[{env.broker_name}\].* OK, \d+", out), env.fail_text("no OK line")
    r = env.shell.op("send", topic=env.topic, count=1, key_prefix="rewritable")
    assert r["sent_ok"] == 1, env.fail_text(f"send failed after addWritePerm: {r}")


def test_clean_commands(env: Env) -> None:
    """cleanExpiredCQ (306), cleanUnusedTopic (316), deleteExpiredCommitLog (329) each report success."""
    for cmd in ("cleanExpiredCQ", "cleanUnusedTopic", "deleteExpiredCommitLog"):
        out = ran(env, env.mqadmin(cmd, "-c", "DefaultCluster"))
        assert out.strip().endswith("success"), env.fail_text(f"{cmd}: no success")


# -- statistics (last: they need the reference's 10 s samples) ---------------------------------------------


def test_broker_consume_stats(env: Env) -> None:
    """brokerConsumeStats (317): one row per queue of T for G, each with Diff 0 once G caught up."""
    rows = caught_up(env, env.topic, env.group)
    assert {row[2] for row in rows} == {env.broker_name}, env.fail_text(f"rows {rows}")


def test_stats_all(env: Env) -> None:
    """statsAll (315): T's 24-hour in and out counts are within 10% of what was sent and consumed; consumerProgress
    (208) a consume TPS above 0."""
    env.shell.op("send", topic=env.stats_topic, count=STATS_COUNT, key_prefix="stats")
    env.shell.wait_received("stats", lambda r: sum(1 for k in r["keys"] if k.startswith("stats-")) >= STATS_COUNT)

    def probe() -> list[str]:
        out = ran(env, env.mqadmin("statsAll", "-t", env.stats_topic))
        return next((row for row in rows_of(out, env.stats_topic) if len(row) >= 7 and row[1] == env.stats_group), [])

    row = poll(env, "statsAll counts", probe,
               lambda row: bool(row) and int(row[5]) >= STATS_COUNT * 0.9 and int(row[6]) >= STATS_COUNT * 0.9,
               timeout=30)
    for figure in (int(row[5]), int(row[6])):
        assert abs(figure - STATS_COUNT) <= STATS_COUNT * 0.1, env.fail_text(f"statsAll row {row}")
    # consumerProgress (208) reports the group's consume TPS of the last minute: not 0 after that traffic
    reply = env.mqadmin("consumerProgress", "-g", env.stats_group)
    if not (env.server.name.startswith("apache") and reference_gap(env.server, env.line, "consumerProgress")):
        m = re.search(r"Consume TPS:\s*([\d.]+)", ran(env, reply))
        assert m and float(m.group(1)) > 0, env.fail_text("consumerProgress: no consume TPS")
