"""Requests the broker starts, through the proxy, and two proxies in front of one cluster.

A 4.9.7 cluster of one broker (the rebalance scenario counts queues of one broker) with quick
transaction check-backs (the session's shared "4.9.7-one-tx"), and two ``rmqproxy proxy``
processes in front of it:
- a transaction whose producer answers UNKNOW is checked back (CHECK_TRANSACTION_STATE reaches
  the producer through the proxy, its END_TRANSACTION goes back) and the consumer gets exactly the
  committed messages;
- when one of two consumers leaves, the other takes all queues within 5 s: the broker's
  NOTIFY_CONSUMER_IDS_CHANGED reaches it through the proxy;
- messages sent through one proxy are consumed through the other, and by a client given both.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.interop.apache_cluster import SHARED, ApacheCluster
from tests.interop.scenario_checks import assert_all_received, explain, no_error, send_to_new_topic
from tests.interop.scenario_runner import ScenarioProgram, unique_name
from tests.interop.server import RunningProxy
from tests.interop.test_transactions import TRANSACTION_CONF, commit_rollback_and_check_back

from .proxied import ONLY_49, ProxiedCluster


pytestmark = pytest.mark.apache_cluster("4.9.7-one-tx")


@pytest.fixture(scope="module")
def proxied(apache_clusters: Callable[[str], ApacheCluster]) -> Iterator[ProxiedCluster]:
    assert SHARED["4.9.7-one-tx"]["broker_conf"] == TRANSACTION_CONF
    with ProxiedCluster(apache_clusters("4.9.7-one-tx")) as server:
        yield server


@pytest.fixture(scope="module")
def second(proxied: ProxiedCluster) -> Iterator[RunningProxy]:
    with RunningProxy(proxied.cluster.namesrv) as proxy:
        yield proxy


def test_transaction_check_back_through_the_proxy(program: ScenarioProgram, proxied: ProxiedCluster) -> None:
    commit_rollback_and_check_back(program, proxied, unique_name("ViaTx", program.line))


@ONLY_49
def test_rebalance_is_told_through_the_proxy(program: ScenarioProgram, proxied: ProxiedCluster) -> None:
    topic = unique_name("ViaRebal", program.line)
    r = program.run("rebalance", namesrv=proxied.namesrv, topic=topic, group=f"{topic}-cg", queues=8, count=80)
    no_error(r, proxied)
    fields = ("route_queues", "a_alone", "split", "takeover", "consumed", "allocations")
    assert r["split"]["ok"], explain(r, proxied, *fields)
    assert r["takeover"]["b"] == list(range(8)) and r["takeover"]["ms"] <= 5000, explain(r, proxied, *fields)
    assert r["consumed"] == r["expected"], explain(r, proxied, *fields)


@ONLY_49
def test_two_proxies_in_front_of_one_cluster(program: ScenarioProgram, proxied: ProxiedCluster, second: RunningProxy,
                                             tmp_path_factory: pytest.TempPathFactory) -> None:  # fmt: skip
    sent: dict[str, Any] = send_to_new_topic(program, proxied, tmp_path_factory, "ViaTwo", count=400)
    no_error(sent, proxied)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:  # two consumers of their own groups: side by side
        runs = {namesrv: pool.submit(program.run, "push", namesrv=namesrv, manifest=sent["_manifest"],
                                     group=unique_name("ViaTwo", program.line), timeout_ms=60000)
                for namesrv in (second.namesrv, f"{proxied.namesrv};{second.namesrv}")}  # fmt: skip
    for namesrv, run in runs.items():
        r = run.result()
        no_error(r, proxied)
        assert_all_received(r, proxied, f"push via {namesrv}")
    assert any(e["topic"] == sent["topic"] and e["msgs"] for e in second.pull_events())
