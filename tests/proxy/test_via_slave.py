"""A master with a slave behind the proxy (issue 41): with the master killed, a consumer consumes
from the slave through the proxy, and carries on from the master when it is back.

A cluster of its own (one 4.9.7 name server, broker-a's master and its slave, ``slaveReadEnable``
on both: a slave without it answers pulls PULL_RETRY_IMMEDIATELY), started for this module: a
slave in the session's shared cluster would change the routes every other test sees. N messages
are sent while both run and the slave has them all; the master is SIGKILLed; a 4.9.8 push
consumer then started finds only the slave in the route (brokerAddrs {1: ...}) and pulls every
message from it; the master is started again, the consumer goes back to it (its pulls' answers
suggest broker id 0, which the route has again), and M more messages sent then arrive, from the
master. Nothing is sent while the master is down (broker-a would take no message).

The same runs with the clients given the Apache name server directly, no proxy, for comparison:
``RMQ_REFERENCE_FAULTS=1`` (as tests/proxy/test_via_faults.py, to keep the suite's time).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codec.bodies import TopicRouteData
from codec.codes import RequestCode, ResponseCode
from tests.interop.apache_cluster import ApacheCluster
from tests.interop.scenario_checks import explain, no_error
from tests.interop.scenario_runner import ScenarioError, ScenarioProgram, unique_name
from tests.interop.server import ScenarioServer, ServerError
from tests.interop.wire import WireClient
from tests.needs import require_java_tools

from .proxied import ONLY_49, ProxiedCluster

BROKER = "broker-a"
QUEUES = 4
BEFORE = 200  # sent while master and slave run, consumed from the slave
AFTER = 100  # sent once the master is back, consumed from it
#: How often the consumer asks for its route and sends heartbeats (its default is 30 s each): the
#: master is back in its route soon, and knows the consumer soon (until it does, it answers the
#: pulls the consumer sends it SUBSCRIPTION_NOT_EXIST: a master back from a crash knows no consumer).
POLL_NAMESRV_MS = 1000
HEARTBEAT_MS = 1000
REPLICATION_TIMEOUT = 30.0  # the slave syncs topic configs every 10 s
#: Until every queue's pull has gone back to the master: a pull the slave holds comes back after
#: the consumer's 15 s suspend, on the slave's 5 s check.
BACK_TIMEOUT = 45.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[ApacheCluster]:
    require_java_tools("the reference cluster with a slave")
    with ApacheCluster((BROKER,), slaves=(BROKER,), broker_conf={"slaveReadEnable": "true"}) as running:
        print(f"\n{running.name} with a slave ready in {running.startup_seconds:.1f}s")
        yield running


@pytest.fixture(scope="module")
def proxied(cluster: ApacheCluster) -> Iterator[ProxiedCluster]:
    with ProxiedCluster(cluster) as server:
        yield server


def _node_addrs(namesrv: str, topic: str) -> dict[int, str]:
    """Broker id -> address of broker-a's nodes in ``namesrv``'s route of ``topic``."""
    with WireClient(namesrv) as wire:
        answer = wire.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic=topic)
    assert answer.code == ResponseCode.SUCCESS, answer
    (data,) = TopicRouteData.from_json(answer.body).broker_datas
    return dict(data.broker_addrs)


def _max_offsets(addr: str, topic: str) -> list[int]:
    with WireClient(addr) as wire:
        answers = [wire.call(RequestCode.GET_MAX_OFFSET, topic=topic, queue_id=q) for q in range(QUEUES)]
    return [int(a.ext_fields["offset"]) if a.code == ResponseCode.SUCCESS else -1 for a in answers]


def _wait_replicated(cluster: ApacheCluster, topic: str) -> None:
    """Until the slave has the topic's config (it serves no pull of a topic it does not know) and
    every message the master has."""
    master, slave = cluster.node_addr(BROKER), cluster.node_addr(BROKER, 1)
    deadline = time.monotonic() + REPLICATION_TIMEOUT
    while True:
        with WireClient(slave) as wire:
            topics = wire.call(RequestCode.GET_ALL_TOPIC_CONFIG).body
        offsets = (_max_offsets(master, topic), _max_offsets(slave, topic))
        if topic.encode() in topics and offsets[0] == offsets[1]:
            return
        if time.monotonic() > deadline:
            raise ServerError(f"the slave has not caught up with the master (max offsets {offsets}, "
                              f"topic known: {topic.encode() in topics})\n{cluster.log_tail()}")  # fmt: skip
        time.sleep(0.2)


def _send(program: ScenarioProgram, server: ScenarioServer, namesrv: str, topic: str, count: int, prefix: str,
          tmp_path: Path) -> list[str]:  # fmt: skip
    """``count`` messages to ``topic`` (the send scenario's four modes); their keys."""
    manifest = tmp_path / f"{prefix}.tsv"
    sent = program.run("send", namesrv=namesrv, topic=topic, group=f"{topic}-producer", count=count,
                       key_prefix=prefix, manifest=manifest)  # fmt: skip
    no_error(sent, server)
    for m in sent["modes"].values():
        assert set(m["statuses"]) <= {"SEND_OK", "ONEWAY"}, explain(sent, server, "modes", "failures")
    return [line.split("\t", 1)[0] for line in manifest.read_text().splitlines() if not line.startswith("#")]


def _master_down_and_back(program: ScenarioProgram, server: ScenarioServer, cluster: ApacheCluster,
                          namesrv: str, tmp_path: Path) -> dict[str, Any]:  # fmt: skip
    """The scenario of the module's docstring with the clients on ``namesrv``; the follow
    consumer's result, with ``before`` and ``after`` (the keys sent), ``nodes`` (broker id ->
    the address clients use) and ``timings``."""
    if not cluster.alive():  # a run that failed with the master down
        cluster.start()
    topic = unique_name("SlaveRead", program.line)
    with WireClient(cluster.node_addr(BROKER)) as wire:
        assert wire.create_topic(topic, QUEUES).code == ResponseCode.SUCCESS
    nodes = _node_addrs(namesrv, topic)
    assert set(nodes) == {0, 1}, nodes
    timings: dict[str, float] = {}
    began = time.monotonic()
    before = _send(program, server, namesrv, topic, BEFORE, f"{topic}-before", tmp_path)
    _wait_replicated(cluster, topic)
    timings["sent_and_replicated"] = time.monotonic() - began

    cluster.kill(BROKER)
    cluster.wait_listed(BROKER, present=False)
    assert _node_addrs(namesrv, topic) == {1: nodes[1]}  # the route names the slave only
    run = program.start("follow", namesrv=namesrv, topic=topic, group=f"{topic}-cg", poll_namesrv_ms=POLL_NAMESRV_MS,
                        heartbeat_ms=HEARTBEAT_MS, watch_addr=nodes[0])  # fmt: skip
    try:
        mark = time.monotonic()
        run.wait_progress("distinct", BEFORE, timeout=60)
        timings["consumed_from_slave"] = time.monotonic() - mark

        mark = time.monotonic()
        cluster.start_broker(BROKER)
        timings["master_restarted"] = time.monotonic() - mark
        mark = time.monotonic()
        run.wait_progress("watched_queues", QUEUES, timeout=BACK_TIMEOUT)
        timings["pulls_back_at_master"] = time.monotonic() - mark

        after = _send(program, server, namesrv, topic, AFTER, f"{topic}-after", tmp_path)
        mark = time.monotonic()
        run.wait_progress("distinct", BEFORE + AFTER, timeout=60)
        timings["consumed_from_master"] = time.monotonic() - mark
        r = run.finish(timeout=60)
    except ScenarioError as e:
        raise ScenarioError(f"{e}\n{server.log_tail()}") from None
    finally:
        run.kill()
    r.update(before=before, after=after, nodes=nodes, timings={k: round(v, 1) for k, v in timings.items()})
    return r


def _check(r: dict[str, Any], server: ScenarioServer, label: str) -> None:
    """Every key arrived, those sent before from the slave and those sent after from the master."""
    no_error(r, server)
    counts, nodes, came = r["counts"], r["nodes"], r["pulled_from"]
    duplicates = {k: n - 1 for k, n in counts.items() if n > 1}
    print(f"{label}: timings {r['timings']}, pulls {r['pulls']}, keys by address "
          f"{ {addr: len(keys) for addr, keys in came.items()} }, nodes {nodes}, "
          f"duplicates {sum(duplicates.values())} of {len(duplicates)} keys")  # fmt: skip
    fields = ("pulls", "nodes", "timings", "deliveries")
    missing = [k for k in (*r["before"], *r["after"]) if k not in counts]
    assert not missing, f"{label}: {len(missing)} keys never arrived: {missing[:10]}\n" + explain(r, server, *fields)
    unexpected = set(counts) - {*r["before"], *r["after"]}
    assert not unexpected, f"{label}: keys not sent: {sorted(unexpected)[:10]}"
    from_slave, from_master = set(came.get(nodes[1], ())), set(came.get(nodes[0], ()))
    assert set(r["before"]) <= from_slave, explain(r, server, *fields)  # the master was down
    assert set(r["after"]) <= from_master, explain(r, server, *fields)  # every queue had gone back to it


@ONLY_49
def test_the_master_killed_consumers_read_the_slave_then_the_master_again(
    program: ScenarioProgram, proxied: ProxiedCluster, tmp_path: Path
) -> None:
    """Through the proxy: the route it answers while the master is down names its listener for
    (broker-a, 1), and the consumer's pulls reach the slave through it."""
    r = _master_down_and_back(program, proxied, proxied.cluster, proxied.namesrv, tmp_path)
    _check(r, proxied, "via the proxy")
    assert r["nodes"][1] != proxied.cluster.slave_addrs[BROKER]  # the proxy's listener for (broker-a, 1)


@ONLY_49
@pytest.mark.skipif(os.environ.get("RMQ_REFERENCE_FAULTS") != "1", reason="the reference's run: RMQ_REFERENCE_FAULTS=1")
def test_reference_the_master_killed_consumers_read_the_slave_then_the_master_again(
    program: ScenarioProgram, cluster: ApacheCluster, tmp_path: Path
) -> None:
    """The same with the clients given the Apache name server, no proxy."""
    r = _master_down_and_back(program, cluster, cluster, cluster.namesrv, tmp_path)
    _check(r, cluster, "the reference")
