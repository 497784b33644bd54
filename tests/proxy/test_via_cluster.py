"""Real Java clients through ``rmqproxy proxy`` in front of a real Apache cluster (broker-a and
broker-b behind one name server): 4.9.7 brokers, and for producers and consumers also 5.3.1
brokers. Clients know only the proxy.

Each scenario is the interop suite's (tests/interop/test_scenarios.py) run through the proxy;
what the reference itself cannot do (a 5.x lite pull against a 4.9.7 broker) is expected to fail
the same way through the proxy (``scenario_checks.reference_gap``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from codec.bodies import TopicRouteData
from codec.codes import RequestCode
from tests.interop.apache_cluster import ApacheCluster
from tests.interop.scenario_checks import (
    assert_all_received,
    explain,
    no_error,
    reference_gap,
    send_to_new_topic,
    traffic_across,
)
from tests.interop.scenario_runner import ScenarioProgram, unique_name
from tests.interop.wire import WireClient

from .proxied import ONLY_49, ProxiedCluster

SEND_COUNT = 2000

pytestmark = pytest.mark.apache_cluster(param="proxied")


@pytest.fixture(scope="module", params=["4.9.7"])
def proxied(request: pytest.FixtureRequest, apache_clusters: Callable[[str], ApacheCluster]) -> Iterator[ProxiedCluster]:
    """The shared 4.9.7 cluster behind the proxy; tests marked ``BOTH_CLUSTERS`` also run on 5.3.1."""
    with ProxiedCluster(apache_clusters(request.param)) as server:
        yield server


#: Producers and consumers also run against a 5.3.1 cluster; the rest (retry, mqadmin, restart)
#: relay nothing the 4.9.7 runs do not, and the suite's time is bounded.
BOTH_CLUSTERS = pytest.mark.parametrize("proxied", ["4.9.7", "5.3.1"], indirect=True)


@pytest.fixture(scope="module")
def sent(program: ScenarioProgram, proxied: ProxiedCluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Sync, async, oneway and batch sends to a fresh topic, auto-created on both brokers."""
    return send_to_new_topic(program, proxied, tmp_path_factory, "ViaSend", count=SEND_COUNT)


def _route(proxied: ProxiedCluster, topic: str) -> TopicRouteData:
    answer = WireClient(proxied.namesrv).call(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic=topic)
    assert answer.code == 0, answer.remark
    return TopicRouteData.from_json(answer.body)


@BOTH_CLUSTERS
def test_send_reaches_both_brokers_through_the_proxy_s_addresses(sent: dict[str, Any], proxied: ProxiedCluster) -> None:
    no_error(sent, proxied)
    modes = sent["modes"]
    for mode in ("sync", "async"):
        assert modes[mode]["statuses"] == {"SEND_OK": SEND_COUNT // 4}, explain(sent, proxied, "modes", "failures")
    assert sum(modes["batch"]["statuses"].values()) == modes["batch"]["count"]
    route = _route(proxied, sent["topic"])
    low, high = proxied.proxy.broker_ports
    addresses = {b.broker_name: b.broker_addrs[0] for b in route.broker_datas}
    assert set(addresses) == {"broker-a", "broker-b"}, route
    assert all(low <= int(a.rsplit(":", 1)[1]) <= high for a in addresses.values()), addresses


@pytest.fixture(scope="module")
def pushed(program: ScenarioProgram, proxied: ProxiedCluster, sent: dict[str, Any]) -> dict[str, Any]:
    """A push consumer read the send scenario's messages (mqadmin's consumerProgress reads its group)."""
    return program.run("push", namesrv=proxied.namesrv, manifest=sent["_manifest"],
                       group=unique_name("ViaPush", program.line), timeout_ms=60000)  # fmt: skip


@BOTH_CLUSTERS
def test_push_consumer_gets_every_message(pushed: dict[str, Any], proxied: ProxiedCluster, sent: dict[str, Any]) -> None:
    r = pushed
    no_error(r, proxied)
    assert_all_received(r, proxied, "push")
    events = proxied.proxy.pull_events()
    mine = [e for e in events if e["topic"] == sent["topic"] and e["code"] == "SUCCESS"]
    assert sum(e["msgs"] for e in mine) >= SEND_COUNT, "the proxy's pull log misses pulls it relayed"


@BOTH_CLUSTERS
def test_lite_pull_consumer_gets_every_message(program: ScenarioProgram, proxied: ProxiedCluster,
                                                sent: dict[str, Any]) -> None:  # fmt: skip
    if proxied.cluster.broker_5 is False and reference_gap(proxied, program.line, "litepull"):
        pytest.xfail(reference_gap(proxied, program.line, "litepull"))
    r = program.run("litepull", namesrv=proxied.namesrv, manifest=sent["_manifest"],
                    group=unique_name("ViaLite", program.line), timeout_ms=60000)  # fmt: skip
    no_error(r, proxied)
    for mode in ("subscribe", "assign"):
        sub = {**r[mode], "_log_dir": r["_log_dir"], "_progress": r["_progress"],
               "client_version": r["client_version"], "scenario": f"litepull/{mode}"}  # fmt: skip
        assert_all_received(sub, proxied, f"lite pull ({mode})")


def test_retry_and_dlq_through_send_back(program: ScenarioProgram, proxied: ProxiedCluster) -> None:
    topic = unique_name("ViaRetry", program.line)
    group = f"{topic}-cg"
    r = program.run("retry", namesrv=proxied.namesrv, topic=topic, group=group, count=1, max_reconsume=2,
                    timeout_ms=90000)  # fmt: skip
    no_error(r, proxied)
    for key, seq in r["sequences"].items():
        assert seq == [0, 1, 2], f"{key}: {seq}\n" + explain(r, proxied, "sequences", "deliveries")
    assert r["dlq"]["topic"] == f"%DLQ%{group}" and r["dlq"]["found"] == 1, explain(r, proxied, "dlq")


def test_mqadmin_through_the_proxy(program: ScenarioProgram, proxied: ProxiedCluster, sent: dict[str, Any],
                                   pushed: dict[str, Any]) -> None:  # fmt: skip
    """topicList, topicRoute, updateTopic (-c: on every broker of the cluster), consumerProgress
    and brokerStatus, with only the proxy's address."""
    no_error(sent, proxied)
    no_error(pushed, proxied)
    sample = sent["samples"][0]
    new_topic = unique_name("ViaAdmin", program.line)
    r = program.run("mqadmin", namesrv=proxied.namesrv, topic=sent["topic"], group=pushed["group"],
                    msg_id=sample["offset_msg_id"], key=sample["key"], new_topic=new_topic,
                    broker_addr=proxied.broker_addr)  # fmt: skip
    no_error(r, proxied)
    out = {}
    for c in r["commands"]:
        name = c["name"] if c["name"] != "topicRoute" or sent["topic"] in c["args"] else "topicRoute(new)"
        out[name] = c
    print("\n".join(f"$ mqadmin {' '.join(c['args'])}\n{c['stdout'][:600]}{c['stderr'][:300]}" for c in r["commands"]))
    assert sent["topic"] in out["topicList"]["stdout"], out["topicList"]
    low, high = proxied.proxy.broker_ports
    for name in ("topicRoute", "topicRoute(new)"):
        text = out[name]["stdout"]
        assert "broker-a" in text and "broker-b" in text, out[name]
        assert any(f"127.0.0.1:{port}" in text for port in range(low, high + 1)), out[name]
    assert out["updateTopic"]["stderr"].strip() == "" and "create topic to" in out["updateTopic"]["stdout"], out["updateTopic"]
    new_route = _route(proxied, new_topic)
    assert sorted(q.broker_name for q in new_route.queue_datas) == ["broker-a", "broker-b"], new_route
    progress = out["consumerProgress"]
    if not reference_gap(proxied, program.line, "consumerProgress") or proxied.cluster.broker_5:
        assert "broker-a" in progress["stdout"] and "broker-b" in progress["stdout"], progress
        assert "Consume TPS" in progress["stdout"] or "Diff Total" in progress["stdout"], progress
    status = out["brokerStatus"]["stdout"]
    assert "brokerVersionDesc" in status and "msgPutTotalTodayNow" in status, out["brokerStatus"]


@ONLY_49
def test_restart_of_the_proxy_is_a_broker_restart_to_clients(program: ScenarioProgram, proxied: ProxiedCluster) -> None:
    """Produce and consume continuously while the proxy restarts: every SEND_OK message arrives."""
    # The topic is on both brokers from the start. Made by the first send instead, it reached the
    # second broker by the 4.9.8 producer's TBW102 round robin of its first 30 s, and the consumer
    # found that broker's queues only at its next route poll (30 s) and rebalance. And the proxy's
    # stop closes its connections to the brokers, after which a 4.9.7 broker forgets the consumer's
    # group until the client's next heartbeat (pulls answered 24, SUBSCRIPTION_NOT_EXIST, till
    # then): 1 s heartbeats, not the client's 30 s.
    topic = unique_name("ViaRestart", program.line)
    for addr in proxied.cluster.broker_addrs.values():
        with WireClient(addr) as wire:
            assert wire.create_topic(topic, 4).code == 0
    (before, _), r = traffic_across(program, proxied.namesrv, topic, proxied.restart, heartbeat_ms=1000)
    no_error(r, proxied)
    fields = ("sent_ok", "send_failed", "received", "distinct", "duplicates", "missing", "missing_keys", "drain_ms")
    assert r["sent_ok"] > before["sent"], explain(r, proxied, *fields)
    assert r["missing"] == 0, f"{r['missing']} acknowledged messages never arrived\n" + explain(r, proxied, *fields)
    print(f"restart via proxy: sent_ok={r['sent_ok']} failed={r['send_failed']} received={r['received']} "
          f"duplicates={r['duplicates']} drain_ms={r['drain_ms']}")
