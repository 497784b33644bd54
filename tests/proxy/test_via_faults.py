"""Faults behind the proxy, with real Java clients and a real 4.9.7 cluster of two brokers and two
name servers (the session's shared one: every test leaves its processes running, as it found them).

- kill -9 of one broker while messages flow: producers go on with the other broker, consumers
  get every message that was acknowledged, and the killed broker is used again once it is back;
- kill -9 of the proxy while messages flow, then a start on the same ports: the same for clients
  as a broker restart, nothing acknowledged lost;
- kill -9 of the first name server while messages flow, then a start: routes come from the second
  one meanwhile, and no client sees an error;
- a broker that stops answering (SIGSTOP): a request through the proxy gets SYSTEM_ERROR with a
  remark at the proxy's timeout, never silence.

``RMQ_REFERENCE_FAULTS=1`` also runs the name-server kill with the Java clients given both name
servers directly, no proxy: the reference's own behaviour, for comparison (not run by default, to
keep the suite's time).
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from codec.bodies import TopicRouteData
from codec.codes import RequestCode, ResponseCode
from codec.command import RemotingCommand
from tests.interop.apache_cluster import ApacheCluster
from tests.interop.scenario_checks import explain, no_error, traffic_across
from tests.interop.scenario_runner import ScenarioProgram, unique_name
from tests.interop.server import ScenarioServer, kill_amid_requests, unread_by_connection
from tests.interop.wire import WireClient

from .proxied import ONLY_49, ProxiedCluster

TIMEOUT_MS = 2000
#: How often the Java clients of the name-server test ask for their routes (theirs is 30 s): many
#: times while the first name server is down.
POLL_NAMESRV_MS = 500
#: The result fields a traffic scenario's failure message shows.
TRAFFIC_FIELDS = ("sent_ok", "send_not_ok", "send_not_ok_statuses", "send_failed", "send_failures", "received",
                  "distinct", "duplicates", "missing", "missing_keys", "drain_ms")  # fmt: skip

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
        kill_amid_requests(proxy.pids, set(range(first, last + 1)), proxy.kill)
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


def _route(namesrv: str, topic: str) -> RemotingCommand:
    """GET_ROUTEINFO_BY_TOPIC of ``topic`` from ``namesrv``."""
    with WireClient(namesrv) as wire:
        return wire.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic=topic)


def _across_a_name_server_kill(program: ScenarioProgram, cluster: ApacheCluster, namesrv: str, topic: str,
                               kill: Callable[[], None] | None = None) -> dict[str, Any]:  # fmt: skip
    """The producer and consumer of ``traffic_across`` on ``namesrv``, asking for their routes every
    ``POLL_NAMESRV_MS``, while the first of the cluster's two name servers is killed (by ``kill``,
    else a plain SIGKILL) and then started again; ``route_failures`` in the result: what the
    clients logged of the route requests that failed."""
    assert len(cluster.namesrv_addrs) == 2, cluster
    down: list[float] = []

    def kill_first() -> None:
        if kill is not None:
            kill()
        else:
            cluster.kill_namesrv(0)
        assert not cluster.namesrv_alive(0)
        down.append(time.monotonic())

    def start_first() -> None:
        cluster.start_namesrv(0)
        down.append(time.monotonic())

    (before, during, back), r = traffic_across(program, namesrv, topic, kill_first, start_first, timeout=120,
                                               poll_namesrv_ms=POLL_NAMESRV_MS)  # fmt: skip
    r["route_failures"] = _route_failures(r["_log_dir"])
    print(f"kill -9 of the first name server, down {down[1] - down[0]:.1f} s: before={before} during={during} "
          f"back={back} sent_ok={r['sent_ok']} not_ok={r['send_not_ok']} failed={r['send_failed']} "
          f"{r['send_failures']} received={r['received']} duplicates={r['duplicates']} missing={r['missing']} "
          f"route failures logged={len(r['route_failures'])} {r['route_failures'][:3]}")
    return r


def _route_failures(log_dir: str) -> list[str]:
    """The route requests that failed, as the Java client logged them (4.9.x logs each one: its log
    line and the exception's first line), but for TOPIC_NOT_EXIST, which the producer's first look
    for its new topic gets."""
    failures = []
    for path in sorted(Path(log_dir).rglob("rocketmq_client*.log")):
        for entry in re.split(r"\n(?=\d{4}-\d\d-\d\d )", path.read_text(errors="replace")):
            if "updateTopicRouteInfoFromNameServer" in entry and "CODE: 17 " not in entry:
                failures.append(" / ".join(entry.splitlines()[:2]))
    return failures


@ONLY_49
def test_the_first_name_server_killed_during_traffic(program: ScenarioProgram, proxied: ProxiedCluster) -> None:
    """Two upstream name servers, the first SIGKILLed while a producer and a consumer run through
    the proxy (then started again): routes the proxy is asked for meanwhile come from the second,
    no send fails, no client's route request fails, and every acknowledged message is consumed."""
    cluster, proxy = proxied.cluster, proxied.proxy
    topic = unique_name("ViaNamesrvKill", program.line)
    for addr in cluster.broker_addrs.values():  # on both brokers from the start, as above: its route names both
        with WireClient(addr) as wire:
            assert wire.create_topic(topic, 4).code == ResponseCode.SUCCESS
    log_from = proxy.log_path.stat().st_size
    in_flight: list[RemotingCommand] = []

    def kill_amid_a_route_request() -> None:
        """SIGSTOP the first name server, ask the proxy for the topic's route (which it forwards
        there, where it stays unread), then SIGKILL it: the proxy must ask the second instead."""
        pid, port = cluster.namesrv_pid(0), cluster.namesrv_ports[0]
        os.kill(pid, signal.SIGSTOP)
        asking = threading.Thread(target=lambda: in_flight.append(_route(proxied.namesrv, topic)))
        asking.start()
        deadline = time.monotonic() + TIMEOUT_MS / 2000  # well before the proxy's own timeout
        while time.monotonic() < deadline and not any(unread_by_connection({port}).values()):
            time.sleep(0.01)
        cluster.kill_namesrv(0)
        asking.join(timeout=10)

    r = _across_a_name_server_kill(program, cluster, proxied.namesrv, topic, kill_amid_a_route_request)
    no_error(r, proxied)
    (answer,) = in_flight
    assert answer.code == ResponseCode.SUCCESS, answer  # in flight to the first when it died: the second answered
    route = TopicRouteData.from_json(answer.body)
    assert {b.broker_name for b in route.broker_datas} == set(cluster.broker_names), route
    with open(proxy.log_path, "rb") as log:
        log.seek(log_from)
        failover = [line.decode(errors="replace").rstrip() for line in log if b"trying the next" in line]
    print("proxy:", *failover, sep="\n  ")
    assert failover, proxied.log_tail()  # it failed over, and said so
    _no_send_failed_and_nothing_missing(r, proxied)
    assert r["route_failures"] == [], explain(r, proxied, "route_failures")  # every route request was answered


@ONLY_49
@pytest.mark.skipif(os.environ.get("RMQ_REFERENCE_FAULTS") != "1", reason="the reference's run: RMQ_REFERENCE_FAULTS=1")
def test_reference_the_first_name_server_killed_during_traffic(program: ScenarioProgram,
                                                               proxied: ProxiedCluster) -> None:  # fmt: skip
    """The same with the Java clients given both name servers ("a;b") and no proxy. Each client
    instance (the producer's, the consumer's) starts on one of them at random; one on the killed
    name server takes the other for its next route request."""
    cluster = proxied.cluster
    topic = unique_name("DirectNamesrvKill", program.line)
    r = _across_a_name_server_kill(program, cluster, cluster.namesrv_addr, topic)
    no_error(r, cluster)
    _no_send_failed_and_nothing_missing(r, cluster)


def _no_send_failed_and_nothing_missing(r: dict[str, Any], server: ScenarioServer) -> None:
    assert r["send_failed"] == 0 and r["send_not_ok"] == 0, explain(r, server, *TRAFFIC_FIELDS)
    missing = f"{r['missing']} acknowledged messages never arrived\n"
    assert r["missing"] == 0, missing + explain(r, server, *TRAFFIC_FIELDS)


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
