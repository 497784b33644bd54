"""Idle pulls through the proxy in front of a real 4.9.7 broker end at the client's own deadline.

The broker checks its held pulls' deadlines every 5 s, so over a direct connection a pull that
asked for a 1 s, 5 s or 15 s hold ends up to 5 s late; through the proxy the client gets its
PULL_NOT_FOUND at the deadline. The same pulls are sent to the broker directly, as the
reference: both must answer PULL_NOT_FOUND, no earlier than asked; only the proxy must be on time.

The broker is broker-a of the session's shared 4.9.7 cluster. The three holds are waits, so they
run side by side: the module's fixture sends all of them at once (each hold to a topic of its
own, through the proxy and directly), and each test judges its own.
"""

from __future__ import annotations

import concurrent.futures
import selectors
import time
from collections.abc import Callable, Iterator

import pytest

from codec.bodies import TopicRouteData
from codec.codes import PullSysFlag, RequestCode, ResponseCode
from codec.command import RemotingCommand
from codec.headers import REQUEST_HEADERS
from codec.peer import ANSWER
from tests.interop.apache_cluster import ApacheCluster
from tests.interop.server import RunningProxy
from tests.interop.wire import WireClient

SUSPENDS_MS = (1000, 5000, 15000)
QUEUES = 8
#: What the proxy may add to a deadline on a loaded CI machine (bench/proxy.py measures it closely).
LATE_MS = 100.0


pytestmark = pytest.mark.apache_cluster("4.9.7")

#: (code, ms to answer) of each pull through the proxy and directly
Held = tuple[list[tuple[int, float]], list[tuple[int, float]]]


@pytest.fixture(scope="module")
def held(apache_clusters: Callable[[str], ApacheCluster]) -> Iterator[dict[int, concurrent.futures.Future[Held]]]:
    """Per suspend time, the pulls through the proxy and directly, all started at once."""
    cluster = apache_clusters("4.9.7")
    with RunningProxy(cluster.namesrv) as proxy, concurrent.futures.ThreadPoolExecutor(len(SUSPENDS_MS)) as pool:
        routes = {}
        for suspend_ms in SUSPENDS_MS:
            topic = f"Precise{suspend_ms}"
            assert WireClient(cluster.broker_addr).create_topic(topic, QUEUES).code == ResponseCode.SUCCESS
            via = _broker_address_via(proxy, topic)
            assert via != cluster.broker_addr
            routes[suspend_ms] = (topic, via)
        yield {ms: pool.submit(_through_and_direct, via, cluster.broker_addr, topic, ms)
               for ms, (topic, via) in routes.items()}  # fmt: skip


def _through_and_direct(via: str, direct: str, topic: str, suspend_ms: int) -> Held:
    with concurrent.futures.ThreadPoolExecutor(2) as pool:  # at the same time: the module's time is bounded
        through_f = pool.submit(_held_pulls, via, topic, f"{topic}-via", suspend_ms)
        direct_f = pool.submit(_held_pulls, direct, topic, f"{topic}-direct", suspend_ms)
        return through_f.result(), direct_f.result()


def _held_pulls(addr: str, topic: str, group: str, suspend_ms: int) -> list[tuple[int, float]]:
    """QUEUES suspended pulls of empty queues sent at once on one connection: (code, ms to answer) each."""
    client = WireClient(addr, timeout=suspend_ms / 1000 + 15)
    codec = REQUEST_HEADERS[RequestCode.PULL_MESSAGE]
    sent: dict[int, float] = {}
    for queue in range(QUEUES):
        header = codec.cls(consumer_group=group, topic=topic, queue_id=queue, queue_offset=0, max_msg_nums=32,
                           sys_flag=PullSysFlag.SUSPEND | PullSysFlag.SUBSCRIPTION, commit_offset=0, suspend_timeout_millis=suspend_ms, subscription="*",
                           sub_version=1)  # fmt: skip
        opaque, data = client.peer.request(RemotingCommand(code=RequestCode.PULL_MESSAGE, ext_fields=codec.encode(header)))
        sent[opaque] = time.monotonic()  # before the send: the server cannot have it earlier. Stamped
        client.sock.sendall(data)  # after, another of the module's threads could hold the GIL 5 ms between
    results = []
    with selectors.DefaultSelector() as sel:
        sel.register(client.sock, selectors.EVENT_READ)
        while len(results) < QUEUES:
            assert sel.select(timeout=suspend_ms / 1000 + 15), "pulls not answered"
            chunk = client.sock.recv(65536)
            now = time.monotonic()
            assert chunk, "connection closed"
            for incoming in client.peer.receive(chunk):
                if incoming.kind is ANSWER:
                    results.append((incoming.command.code, (now - sent[incoming.outstanding.opaque]) * 1000))
    client.close()
    return results


def _broker_address_via(proxy: RunningProxy, topic: str) -> str:
    route = TopicRouteData.from_json(WireClient(proxy.namesrv).call(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic=topic).body)
    return route.broker_datas[0].broker_addrs[0]


@pytest.mark.parametrize("suspend_ms", SUSPENDS_MS)
def test_idle_pulls_end_at_the_client_s_deadline_through_the_proxy(held: dict[int, concurrent.futures.Future[Held]],
                                                                  suspend_ms: int) -> None:  # fmt: skip
    through, direct = held[suspend_ms].result()
    late_through = sorted(round(ms - suspend_ms, 1) for _, ms in through)
    late_direct = sorted(round(ms - suspend_ms, 1) for _, ms in direct)
    print(f"suspend {suspend_ms} ms: late by (ms) through the proxy {late_through}, direct {late_direct}")
    assert {code for code, _ in through} == {code for code, _ in direct} == {ResponseCode.PULL_NOT_FOUND}
    assert min(late_direct) >= -1.0, "the reference answered before the deadline"
    assert min(late_through) >= -1.0 and max(late_through) <= LATE_MS, late_through
