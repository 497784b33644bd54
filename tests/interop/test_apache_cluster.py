"""``apache_cluster.ApacheCluster``: reference name servers (one, or two for the shared 4.9.7
cluster) and two broker masters, 4.9.7 and 5.3.1 brokers, seen through each name server's
GET_BROKER_CLUSTER_INFO; a broker killed leaves the listing and, started again on its port and
store, comes back with its topics; with ``acl`` (4.9.7) every broker refuses an unsigned request
and serves one signed for the account of its ``plain_acl.yml``.  The clusters are the session's
shared ones (tests/interop/apache_cluster.SHARED, which the proxy tests use too): each starts once
for the session (``-s`` prints its startup time).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import socket
from collections.abc import Callable

import pytest

from codec.bodies import TopicRouteData
from codec.codes import RequestCode
from codec.command import RemotingCommand

from .apache_cluster import SHARED_ACL, ApacheCluster
from .scenario_runner import unique_name
from .wire import WireClient, roundtrip

ACL = SHARED_ACL
BROKERS = ("broker-a", "broker-b")

pytestmark = pytest.mark.apache_cluster(param="cluster")

both_lines = pytest.mark.parametrize("cluster", ["4.9.7", "5.3.1"], indirect=True)


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, apache_clusters: Callable[[str], ApacheCluster]) -> ApacheCluster:
    """The session's shared cluster of the parameter: "4.9.7", "5.3.1" or "4.9.7-acl"."""
    return apache_clusters(request.param)


def signed(ext: dict[str, str], body: bytes = b"") -> dict[str, str]:
    """``ext`` with the ACL 1.0 signature: base64 HmacSHA1 of the ext values in key order, then the body."""
    content = "".join(value for _, value in sorted(ext.items())).encode() + body
    digest = hmac.new(ACL["secretKey"].encode(), content, hashlib.sha1).digest()
    return {**ext, "Signature": base64.b64encode(digest).decode()}


def call(addr: str, code: int, ext: dict[str, str] | None) -> RemotingCommand:
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        return roundtrip(sock, RemotingCommand(code=code, opaque=1, ext_fields=ext))


@both_lines
def test_name_server_lists_every_broker(cluster: ApacheCluster) -> None:
    version = "5.3.1" if cluster.broker_5 else "4.9.7"
    assert cluster.name == f"apache-cluster-{version}"
    addrs = cluster.broker_addrs
    assert list(addrs) == list(BROKERS) and len(set(addrs.values())) == len(BROKERS)
    assert cluster.broker_addr == addrs["broker-a"]
    info = cluster.cluster_info()
    assert sorted(info.cluster_addr_table["DefaultCluster"]) == sorted(BROKERS), info
    for name, addr in addrs.items():
        data = info.broker_addr_table[name]
        assert (data.cluster, data.broker_name, data.broker_addrs) == ("DefaultCluster", name, {0: addr}), info
    for i, namesrv in enumerate(cluster.namesrv_addrs):  # the brokers register with every name server
        assert cluster.listed(i) == addrs, namesrv


@both_lines
def test_killed_broker_leaves_and_comes_back(cluster: ApacheCluster) -> None:
    """broker-b, SIGKILLed, drops out of the listing (its connection to the name server closed);
    started again it is listed at the same address, with the topic created before the kill."""
    topic = unique_name("ClusterTopic", cluster.name)
    with WireClient(cluster.broker_addrs["broker-b"]) as wire:
        assert wire.create_topic(topic, 2).code == 0
    cluster.kill("broker-b")
    assert not cluster.alive("broker-b") and cluster.alive("broker-a")
    cluster.wait_listed("broker-b", present=False, timeout=30)
    assert cluster.listed() == {"broker-a": cluster.broker_addrs["broker-a"]}

    cluster.start_broker("broker-b")
    assert cluster.alive() and cluster.listed() == cluster.broker_addrs
    with WireClient(cluster.namesrv) as wire:
        answer = wire.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic=topic)
    assert answer.code == 0, answer.remark
    route = TopicRouteData.from_json(answer.body)
    assert [(b.broker_name, b.broker_addrs) for b in route.broker_datas] == [
        ("broker-b", {0: cluster.broker_addrs["broker-b"]})
    ], route


@pytest.mark.parametrize("cluster", ["4.9.7-acl"], indirect=True)
def test_acl_refuses_unsigned_requests(cluster: ApacheCluster) -> None:
    """Each broker read its own ``plain_acl.yml``: a request without AccessKey and Signature is
    refused, one signed for the account is served (GET_BROKER_CONFIG: the runtime info answers an
    error of its own for the first second, before its statistics have a sample)."""
    assert cluster.listed() == cluster.broker_addrs  # the name server does not check signatures
    for name, addr in cluster.broker_addrs.items():
        refused = call(addr, RequestCode.GET_BROKER_RUNTIME_INFO, None)
        assert refused.code != 0 and "No accessKey is configured" in (refused.remark or ""), (name, refused)
        forged = call(addr, RequestCode.GET_BROKER_CONFIG, {"AccessKey": ACL["accessKey"], "Signature": "forged"})
        assert forged.code != 0 and "Check signature failed" in (forged.remark or ""), (name, forged)
        served = call(addr, RequestCode.GET_BROKER_CONFIG, signed({"AccessKey": ACL["accessKey"]}))
        assert served.code == 0, (name, served, cluster.log_tail(2000))
        assert b"aclEnable=true" in served.body and f"brokerName={name}".encode() in served.body, served.body[:500]
