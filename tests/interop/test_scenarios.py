"""Real Apache RocketMQ clients against the server: the scenarios of scenarios/ (rmqproxy.scenarios.Main).

Each test runs one scenario of the Java program for each client line (4.9.8 and 5.5.0, like the
oracle) and asserts on what the Java client saw.  The server under test is ``rmqproxy serve``
(``server.RunningServer``) started with 1-second delay levels; ``RMQ_SCENARIO_TARGET=apache`` runs
the same tests against the reference Apache RocketMQ 4.9.7 name server + broker instead
(``apache_broker.ApacheBroker``), as a baseline.  One server serves the whole module (topics and
groups are unique per test); the restart and crash scenarios get their own.  The gaps the reference has are in
``scenario_checks.reference_gap``; the offset scenarios are in ``test_offset_scenarios.py``.

Client facts that cost time (the tests allow for them; a server can avoid the first two):
a 5.x push consumer often races its own start heartbeat ("sendHeartbeatToAllBrokerWithLockV2 lock
heartBeat, but failed"), so its pulls carry a newer subVersion than the server registered and a
server applying the reference's rule answers 25 (SUBSCRIPTION_NOT_LATEST) until the next 30 s
heartbeat; a 4.9.x client does not fail requests in flight on a connection the server closed, so
pulls held when the server stops time out after 30 s unless the server answers them before closing
or the connection is reset (the crash test kills the server amid requests, which resets them:
``server.kill_amid_requests``);
a fresh group's %RETRY% queue is assigned only after a route poll and a rebalance (the retry
scenario shortens both intervals).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

import pytest

from codec.codes import RequestCode as C
from codec.codes import ResponseCode as R

from .scenario_checks import (
    assert_all_received,
    explain,
    no_error,
    reference_gap,
    send_to_new_topic,
    start_server,
    traffic_across,
)
from .scenario_runner import ScenarioProgram, unique_name
from .server import ScenarioServer
from .wire import WireClient

TARGET = os.environ.get("RMQ_SCENARIO_TARGET", "rmqproxy")
SEND_COUNT = 10000
SYNC_ASYNC_EACH = SEND_COUNT // 4


# -- fixtures (the client line and the program: conftest.py) -----------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[ScenarioServer]:
    """One server under test for the module (both client lines)."""
    srv = start_server(TARGET)
    try:
        yield srv
    finally:
        srv.close()


@pytest.fixture(scope="module")
def sent(program: ScenarioProgram, server: ScenarioServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Scenario 1 ran once per line: 10,000 messages (sync/async/oneway/batch) to a fresh topic."""
    return send_to_new_topic(program, server, tmp_path_factory, "Send", count=SEND_COUNT)


@pytest.fixture(scope="module")
def pushed(program: ScenarioProgram, server: ScenarioServer, sent: dict[str, Any]) -> dict[str, Any]:
    """Scenario 2 ran once per line (mqadmin's consumerProgress reads its group's offsets)."""
    if "error" in sent:
        pytest.skip("the send scenario failed")
    return program.run("push", namesrv=server.namesrv, manifest=sent["_manifest"],
                       group=unique_name("Push", program.line), timeout_ms=60000)


# -- 1. send ----------------------------------------------------------------------------------------


def test_send(sent: dict[str, Any], server: ScenarioServer) -> None:
    """Sync, async, oneway and batch sends: every sync and async send is SEND_OK."""
    no_error(sent, server)
    modes = sent["modes"]
    assert sum(m["count"] for m in modes.values()) == SEND_COUNT
    for mode in ("sync", "async"):
        assert modes[mode]["statuses"] == {"SEND_OK": SYNC_ASYNC_EACH}, explain(sent, server, "modes", "failures")
    assert sum(modes["oneway"]["statuses"].values()) == modes["oneway"]["count"]
    assert sum(modes["batch"]["statuses"].values()) == modes["batch"]["count"]
    print(f"send: {modes} failures={sent['failure_count']} queues={sent['queues']} elapsed_ms={sent['elapsed_ms']}")


# -- 2-4. consume -------------------------------------------------------------------------------------


def test_push(pushed: dict[str, Any], server: ScenarioServer) -> None:
    """A push consumer (FIRST_OFFSET, concurrently) receives every message of the send scenario."""
    no_error(pushed, server)
    assert_all_received(pushed, server, "push")
    print(f"push: received={pushed['received']} duplicates={pushed['duplicates']} "
          f"first_message_ms={pushed['first_message_ms']} elapsed_ms={pushed['elapsed_ms']}")


def test_litepull(program: ScenarioProgram, server: ScenarioServer, sent: dict[str, Any]) -> None:
    """DefaultLitePullConsumer in subscribe mode and in assign mode each receive every message."""
    gap = reference_gap(server, program.line, "litepull")
    if gap:
        pytest.xfail(gap)
    r = program.run("litepull", namesrv=server.namesrv, manifest=sent["_manifest"],
                    group=unique_name("Lite", program.line), timeout_ms=60000)
    no_error(r, server)
    for mode in ("subscribe", "assign"):
        sub = {**r[mode], "_log_dir": r["_log_dir"], "_progress": r["_progress"],
               "client_version": r["client_version"], "scenario": f"litepull/{mode}"}
        assert_all_received(sub, server, f"lite pull ({mode})")
        print(f"litepull {mode}: received={sub['received']} duplicates={sub['duplicates']} "
              f"first_message_ms={sub['first_message_ms']} elapsed_ms={sub['elapsed_ms']}")


def test_tags(program: ScenarioProgram, server: ScenarioServer, sent: dict[str, Any]) -> None:
    """Subscription "TagA || TagB" receives exactly the TagA and TagB messages, all of them."""
    r = program.run("tags", namesrv=server.namesrv, manifest=sent["_manifest"],
                    group=unique_name("Tags", program.line), timeout_ms=60000)
    no_error(r, server)
    assert set(r["tags"]) <= {"TagA", "TagB"} and r["unwanted_tag_deliveries"] == 0, explain(r, server, "tags")
    assert_all_received(r, server, "tags")
    print(f"tags: {r['tags']} duplicates={r['duplicates']} elapsed_ms={r['elapsed_ms']}")


# -- 5. retry -------------------------------------------------------------------------------------------


def test_retry(program: ScenarioProgram, server: ScenarioServer) -> None:
    """RECONSUME_LATER: redelivered with reconsumeTimes 0, 1, 2, then in %DLQ%<group> (maxReconsumeTimes 2)."""
    topic = unique_name("Retry", program.line)
    group = f"{topic}-cg"
    r = program.run("retry", namesrv=server.namesrv, topic=topic, group=group, count=1, max_reconsume=2,
                    timeout_ms=60000)
    no_error(r, server)
    assert r["send_statuses"] == ["SEND_OK"], explain(r, server, "send_statuses")
    for key, seq in r["sequences"].items():
        assert seq == [0, 1, 2], f"{key}: reconsumeTimes sequence {seq}\n" + explain(r, server, "sequences", "delivery_ms", "deliveries")
    dlq = r["dlq"]
    assert dlq["topic"] == f"%DLQ%{group}"
    assert dlq["found"] == 1 and not dlq["missing_keys"], explain(r, server, "dlq", "sequences", "delivery_ms")
    print(f"retry: sequences={r['sequences']} delivery_ms={r['delivery_ms']} dlq={dlq['messages']}")


# -- 7. rebalance ---------------------------------------------------------------------------------------


def test_rebalance(program: ScenarioProgram, server: ScenarioServer) -> None:
    """Two push consumers split an 8-queue topic; when one shuts down the other takes all 8 within 5 s."""
    topic = unique_name("Rebal", program.line)
    r = program.run("rebalance", namesrv=server.namesrv, topic=topic, group=f"{topic}-cg", queues=8, count=80)
    no_error(r, server)
    fields = ("route_queues", "sent_queues", "a_alone", "split", "takeover", "consumed", "allocations")
    assert r["route_queues"] == 8, explain(r, server, *fields)
    assert r["a_alone"]["queues"] == list(range(8)), explain(r, server, *fields)
    split = r["split"]
    assert split["ok"], "the two consumers did not split the 8 queues\n" + explain(r, server, *fields)
    takeover = r["takeover"]
    assert takeover["b"] == list(range(8)), "B never took all queues\n" + explain(r, server, *fields)
    assert takeover["ms"] <= 5000, f"takeover took {takeover['ms']} ms\n" + explain(r, server, *fields)
    assert r["consumed"] == r["expected"], explain(r, server, *fields)
    print(f"rebalance: split a={split['a']} b={split['b']} in {split['ms']} ms; takeover {takeover['ms']} ms")


# -- 8. mqadmin -----------------------------------------------------------------------------------------


def _topic_status_rows(text: str) -> list[tuple[str, int, int, int]]:
    rows = []
    for ln in text.splitlines():
        m = re.match(r"^(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s", ln)
        if m:
            rows.append((m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4))))
    return rows


def test_mqadmin(program: ScenarioProgram, server: ScenarioServer, sent: dict[str, Any], pushed: dict[str, Any]) -> None:
    """mqadmin clusterList, topicList, topicRoute, topicStatus, updateTopic, consumerProgress, queryMsgById/ByKey."""
    no_error(sent, server)
    sample = sent["samples"][0]
    topic = sent["topic"]
    new_topic = unique_name("Admin", program.line)
    r = program.run("mqadmin", namesrv=server.namesrv, topic=topic, group=pushed["group"],
                    msg_id=sample["offset_msg_id"], key=sample["key"], new_topic=new_topic)
    no_error(r, server)
    broker_addr = server.broker_addr
    broker_name = sample["broker_name"]
    out = {}
    problems = []
    for c in r["commands"]:
        name = c["name"] if c["name"] != "topicRoute" or topic in c["args"] else "topicRoute(new)"
        out[name] = c
    print("\n".join(f"$ mqadmin {' '.join(c['args'])}  ({c['elapsed_ms']} ms)\n{c['stdout']}{c['stderr'][:300]}"
                    for c in r["commands"]))

    def check(name: str, ok: bool, what: str) -> None:
        c = out[name]
        gap = reference_gap(server, program.line, name)
        if gap:
            if ok or "not supported" not in c["stderr"]:
                problems.append(f"{name}: expected the reference gap ({gap}), got:\n{c['stdout']}{c['stderr'][:500]}")
            return
        if not ok:
            problems.append(f"{name}: {what}\n$ mqadmin {' '.join(c['args'])}\n{c['stdout'][-1500:]}"
                            f"\n{c['stderr'][-1500:]}{c.get('thrown') or ''}")

    s = out["clusterList"]["stdout"]
    check("clusterList", broker_addr in s and broker_name in s, f"no line with {broker_name} {broker_addr}")
    s = out["topicList"]["stdout"]
    check("topicList", topic in s.split(), f"{topic} not listed")
    s = out["topicRoute"]["stdout"]
    check("topicRoute", broker_addr in s and f'"brokerName":"{broker_name}"' in s, "route lacks the broker")
    rows = [row for row in _topic_status_rows(out["topicStatus"]["stdout"]) if row[0] == broker_name]
    total = sum(mx - mn for _, _, mn, mx in rows)
    check("topicStatus", len(rows) == len(sent["queues"]) and total == SEND_COUNT,
          f"expected {len(sent['queues'])} queues holding {SEND_COUNT} messages, parsed {rows}")
    s = out["updateTopic"]["stdout"]
    check("updateTopic", "success" in s and new_topic in s, "no success line")
    s = out["topicRoute(new)"]["stdout"]
    check("topicRoute(new)", broker_addr in s and '"writeQueueNums":4' in s, f"{new_topic} not routable with 4 queues")
    s = out["consumerProgress"]["stdout"]
    progress_rows = [ln for ln in s.splitlines() if ln.startswith(topic + " ")]
    check("consumerProgress", len(progress_rows) == len(sent["queues"]) and re.search(r"Diff Total:\s*0\b", s) is not None,
          f"expected {len(sent['queues'])} rows for {topic} and Diff Total: 0")
    s = out["queryMsgById"]["stdout"]
    check("queryMsgById", re.search(rf"Topic:\s+{topic}\b", s) is not None and f"[{sample['key']}]" in s,
          "message not shown")
    s = out["queryMsgByKey"]["stdout"]
    check("queryMsgByKey", sample["msg_id"] in s, f"unique id {sample['msg_id']} not listed")
    assert not problems, "\n\n".join(problems) + f"\n--- server log tail ---\n{server.log_tail(2000)}"


# -- 6. restart (own server) ------------------------------------------------------------------------------


@pytest.fixture
def own_server() -> Iterator[ScenarioServer]:
    srv = start_server(TARGET)
    try:
        yield srv
    finally:
        srv.close()


def test_restart(program: ScenarioProgram, own_server: ScenarioServer) -> None:
    """Produce and consume continuously across a server restart: every SEND_OK message arrives."""
    server = own_server
    topic = unique_name("Restart", program.line)
    # at least 200 messages acknowledged after the restart must arrive before the producer stops
    (before, _), r = traffic_across(program, server.namesrv, topic, server.restart)
    no_error(r, server)
    fields = ("sent_ok", "send_not_ok", "send_not_ok_statuses", "send_failed", "send_failures", "received", "distinct",
              "duplicates", "missing", "missing_keys", "received_unacknowledged", "produce_ms", "drain_ms")
    assert r["sent_ok"] > before["sent"], explain(r, server, *fields)
    assert r["missing"] == 0, f"{r['missing']} acknowledged messages never arrived\n" + explain(r, server, *fields)
    print(f"restart: sent_ok={r['sent_ok']} failed={r['send_failed']} received={r['received']} "
          f"duplicates={r['duplicates']} unacknowledged_received={r['received_unacknowledged']} drain_ms={r['drain_ms']}")


def test_crash(program: ScenarioProgram, own_server: ScenarioServer) -> None:
    """``kill -9`` under the default ASYNC_FLUSH while a producer and a consumer run: after the
    restart every SEND_OK message arrives, no consumer offset points past its queue's end, and
    both clients go on without an error."""
    server = own_server
    topic = unique_name("Crash", program.line)

    def crash() -> None:
        server.crash()  # kill -9, the clients' connections reset (server.kill_amid_requests)
        server.start()

    # 1 s heartbeats: while the server is held stopped for the kill, each client's connection
    # carries a request within a second (a consumer's offsets go only every 5 s, from 10 s on)
    (before, _), r = traffic_across(program, server.namesrv, topic, crash, heartbeat_ms=1000)
    no_error(r, server)
    fields = ("sent_ok", "send_failed", "send_failures", "received", "distinct", "duplicates", "missing",
              "missing_keys", "received_unacknowledged")
    assert r["sent_ok"] > before["sent"], explain(r, server, *fields)
    assert r["missing"] == 0, f"{r['missing']} acknowledged messages never arrived\n" + explain(r, server, *fields)
    past_end = {}
    with WireClient(server.broker_addr) as wire:
        for queue_id in range(16):
            end = wire.call(C.GET_MAX_OFFSET, topic=topic, queue_id=queue_id)
            committed = wire.call(C.QUERY_CONSUMER_OFFSET, consumer_group=f"{topic}-cg", topic=topic, queue_id=queue_id)
            if end.code == R.SUCCESS and committed.code == R.SUCCESS:
                if int(committed.ext_fields["offset"]) > int(end.ext_fields["offset"]):
                    past_end[queue_id] = (committed.ext_fields["offset"], end.ext_fields["offset"])
    assert not past_end, f"consumer offsets past their queue's end (committed, end): {past_end}"
    print(f"crash: sent_ok={r['sent_ok']} failed={r['send_failed']} received={r['received']} "
          f"duplicates={r['duplicates']} unacknowledged_received={r['received_unacknowledged']}")
