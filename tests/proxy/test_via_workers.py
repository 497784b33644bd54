"""``rmqproxy proxy --workers 2`` in front of the session's shared 4.9.7 cluster: one proxy to its
clients and to Prometheus, however its connections spread over the workers.

- Requests on many connections to one broker port are served by the two workers together, and the
  proxy's one ``/metrics`` counts each exactly once, with a ``worker`` label on every series.
- A worker killed with SIGKILL is started again by the supervisor, accepting on the same ports;
  its series go on from where the dead one left them, so the totals stay exact (no dip, no
  double count) and ``rate()`` sees no reset.

(The other proxy tests run with the default, one worker per core: on this machine's two cores,
two workers. So the Java clients, orderly handoff and faults all go through workers too.)
"""

from __future__ import annotations

import os
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from codec.codes import ResponseCode
from tests.interop.apache_cluster import ApacheCluster
from tests.interop.scenario_runner import unique_name
from tests.interop.server import free_port
from tests.interop.wire import WireClient

from .proxied import ProxiedCluster

pytestmark = pytest.mark.apache_cluster("4.9.7")

#: Client connections per phase, and sends on each.
CONNECTIONS = 8
SENDS = 25


@pytest.fixture(scope="module")
def proxied(apache_clusters: Callable[[str], ApacheCluster]) -> Iterator[ProxiedCluster]:
    port = free_port()
    conf = {"workers": "2", "metricsPromExporterPort": str(port)}
    with ProxiedCluster(apache_clusters("4.9.7"), proxy_conf=conf) as server:
        server.metrics_url = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
        yield server


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _wait_ready(proxied: ProxiedCluster, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    status, text = _get(proxied.metrics_url + "/ready")  # type: ignore[attr-defined]
    while status != 200 and time.monotonic() < deadline:
        time.sleep(0.1)
        status, text = _get(proxied.metrics_url + "/ready")  # type: ignore[attr-defined]
    assert status == 200, f"/ready: {status} {text}\n{proxied.log_tail()}"


def _sends_by_worker(proxied: ProxiedCluster) -> dict[str, float]:
    """Successful SEND_MESSAGE_V2 requests each worker has relayed, from the proxy's one /metrics."""
    status, text = _get(proxied.metrics_url + "/metrics")  # type: ignore[attr-defined]
    assert status == 200
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != "rocketmq_rpc_latency":
            continue
        for sample in family.samples:
            labels = sample.labels
            if (sample.name == "rocketmq_rpc_latency_count" and labels.get("request_code") == "send_message_v2"
                    and labels.get("response_code") == "success"):  # fmt: skip
                assert "worker" in labels, sample
                counts[labels["worker"]] = counts.get(labels["worker"], 0) + sample.value
    return counts


def _send_on_many_connections(proxied: ProxiedCluster, topic: str) -> None:
    for _ in range(CONNECTIONS):
        with WireClient(proxied.broker_addr) as wire:
            for _ in range(SENDS):
                answer = wire.send(topic, b"through a worker")
                assert answer.code == ResponseCode.SUCCESS, answer


def test_two_workers_are_one_proxy_and_their_metrics_add_up_across_a_worker_kill(proxied: ProxiedCluster) -> None:
    proxy = proxied.proxy
    _wait_ready(proxied)
    assert len(proxy.worker_pids) == 2, proxied.log_tail()
    topic = unique_name("ViaWorkers", "py")
    for addr in proxied.cluster.broker_addrs.values():
        with WireClient(addr) as wire:
            assert wire.create_topic(topic, 4).code == ResponseCode.SUCCESS
    before = _sends_by_worker(proxied)
    _send_on_many_connections(proxied, topic)
    first = _sends_by_worker(proxied)
    assert sum(first.values()) - sum(before.values()) == CONNECTIONS * SENDS, (before, first)
    print(f"sends by worker after {CONNECTIONS} connections: {first}")

    victim = proxy.worker_pids[0]
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while (victim in proxy.worker_pids or len(proxy.worker_pids) < 2) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert victim not in proxy.worker_pids and len(proxy.worker_pids) == 2, proxied.log_tail()
    _wait_ready(proxied)
    restarted = _sends_by_worker(proxied)
    assert restarted == first, "a worker's counts changed with its restart"

    _send_on_many_connections(proxied, topic)
    second = _sends_by_worker(proxied)
    assert sum(second.values()) - sum(before.values()) == 2 * CONNECTIONS * SENDS, (before, first, second)
    assert all(second.get(w, 0) >= n for w, n in first.items()), (first, second)
    assert "worker 1 ended" in proxy.log_tail(20000) or "worker 2 ended" in proxy.log_tail(20000)
