"""Faults behind the proxy, with real Java clients and a real 4.9.7 cluster of two brokers (the
session's shared one: every test leaves its brokers running, as it found them).

- kill -9 of one broker while messages flow: producers go on with the other broker, consumers
  get every message that was acknowledged, and the killed broker is used again once it is back;
- kill -9 of the proxy while messages flow, then a start on the same ports: the same for clients
  as a broker restart, nothing acknowledged lost;
- a broker that stops answering (SIGSTOP): a request through the proxy gets SYSTEM_ERROR with a
  remark at the proxy's timeout, never silence.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator

import pytest

from codec.bodies import TopicRouteData
from codec.codes import RequestCode, ResponseCode
from tests.interop.apache_cluster import ApacheCluster
from tests.interop.scenario_checks import explain, no_error, traffic_across
from tests.interop.scenario_runner import ScenarioProgram, unique_name
from tests.interop.server import kill_amid_requests
from tests.interop.wire import WireClient

from .proxied import ONLY_49, ProxiedCluster

TIMEOUT_MS = 2000

pytestmark = pytest.mark.apache_cluster("4.9.7")


@pytest.fixture(scope="module")
def proxied(apache_clusters: Callable[[str], ApacheCluster]) -> Iterator[ProxiedCluster]:
    cluster = apache_clusters("4.9.7")
    with ProxiedCluster(cluster, proxy_conf={"proxyRequestTimeoutMillis": str(TIMEOUT_MS)}) as server:
        yield server


@ONLY_49
def test_kill_9_of_a_broker_during_traffic(program: ScenarioProgram, proxied: ProxiedCluster) -> None:
    cluster = proxied.cluster
    # The topic is on both brokers from the start. Made by the first send instead, it reached the
    # second broker only because a 4.9.8 producer sends over TBW102's route (both brokers) until
    # its first route poll, 30 s on; then the consumer found that broker's queues only at its own
    # next poll and rebalance. So the clients poll and rebalance every second: the consumer leaves
    # broker-b's queues and takes them again within a second of the name server's change, not
    # 20-50 s later.
    topic = unique_name("ViaKill", program.line)
    for addr in cluster.broker_addrs.values():
        with WireClient(addr) as wire:
            assert wire.create_topic(topic, 4).code == ResponseCode.SUCCESS
    (before, during, back), r = traffic_across(
        program, proxied.namesrv, topic,
        lambda: cluster.kill("broker-b"),  # broker-a carries on alone
        lambda: cluster.start_broker("broker-b"), timeout=120, poll_namesrv_ms=1000, rebalance_interval_ms=1000,
    )  # fmt: skip
    no_error(r, proxied)
    fields = ("sent_ok", "send_failed", "send_failures", "received", "distinct", "duplicates", "missing", "missing_keys",
              "drain_ms")  # fmt: skip
    print(f"kill -9 broker-b: before={before} during={during} sent_ok={r['sent_ok']} failed={r['send_failed']} "
          f"received={r['received']} duplicates={r['duplicates']}")
    assert r["sent_ok"] > during["sent"], explain(r, proxied, *fields)  # sends went on once broker-b was back
    assert r["missing"] == 0, f"{r['missing']} acknowledged messages never arrived\n" + explain(r, proxied, *fields)


@ONLY_49
def test_kill_9_of_the_proxy_during_traffic(program: ScenarioProgram, proxied: ProxiedCluster) -> None:
    """The proxy killed while messages flow, then started again on the same ports: to clients a
    broker restart (the reference's own case is the broker kill above); nothing acknowledged is
    lost."""
    proxy = proxied.proxy
    first, last = proxy.broker_ports

    def crash_and_start() -> None:
        # amid requests on the broker listeners, as a busy proxy dies: its clients' connections are
        # reset, so a 4.9.8 consumer fails its pulls at once (``kill_amid_requests``)
        kill_amid_requests([proxy.pid], set(range(first, last + 1)), proxy.kill)
        proxy.start()

    topic = unique_name("ViaProxyKill", program.line)
    for addr in proxied.cluster.broker_addrs.values():  # on both brokers from the start, as above
        with WireClient(addr) as wire:
            assert wire.create_topic(topic, 4).code == ResponseCode.SUCCESS
    (before, during), r = traffic_across(program, proxied.namesrv, topic, crash_and_start, timeout=120,
                                         heartbeat_ms=1000)  # fmt: skip
    no_error(r, proxied)
    fields = ("sent_ok", "send_failed", "send_failures", "received", "distinct", "duplicates", "missing", "missing_keys",
              "drain_ms")  # fmt: skip
    print(f"kill -9 of the proxy: before={before} during={during} sent_ok={r['sent_ok']} failed={r['send_failed']} "
          f"received={r['received']} duplicates={r['duplicates']}")
    # received 200 more than were sent when it was killed: sends and pulls went on through the new one
    assert during["received"] >= before["sent"] + 200 and r["sent_ok"] > before["sent"], explain(r, proxied, *fields)
    assert r["missing"] == 0, f"{r['missing']} acknowledged messages never arrived\n" + explain(r, proxied, *fields)


def test_a_broker_that_stops_answering_gets_clients_an_error_at_the_proxy_s_timeout(proxied: ProxiedCluster) -> None:
    route = TopicRouteData.from_json(
        WireClient(proxied.namesrv).call(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="TBW102").body
    )
    via = {b.broker_name: b.broker_addrs[0] for b in route.broker_datas}["broker-a"]
    pid = proxied.cluster.broker_pid("broker-a")
    client = WireClient(via, timeout=30)
    assert client.call(RequestCode.GET_MAX_OFFSET, topic="TBW102", queue_id=0).code == ResponseCode.SUCCESS
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        answer = client.call(RequestCode.GET_MAX_OFFSET, topic="TBW102", queue_id=0)
        waited = time.monotonic() - started
    finally:
        os.kill(pid, signal.SIGCONT)
    print(f"stopped broker: code {answer.code} after {waited:.2f} s: {answer.remark}")
    assert answer.code == ResponseCode.SYSTEM_ERROR and "broker-a" in answer.remark, answer
    assert TIMEOUT_MS / 1000 <= waited <= TIMEOUT_MS / 1000 + 1.5  # the proxy checks deadlines once a second
    assert client.call(RequestCode.GET_MAX_OFFSET, topic="TBW102", queue_id=0).code == ResponseCode.SUCCESS
