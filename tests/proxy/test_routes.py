"""Route and cluster-info rewriting (rmqproxy/proxy/routes.py) and the node directory's ports."""

from __future__ import annotations

import json

import pytest
from twisted.internet import defer
from twisted.internet.error import CannotListenError
from twisted.logger import LogLevel, globalLogPublisher

from codec.codes import RequestCode, ResponseCode
from codec.command import RemotingCommand
from codec.errors import BodyError
from rmqproxy.proxy.nodes import NodeDirectory, NoFreePort, parse_port_range
from rmqproxy.proxy.routes import cluster_nodes, rewrite_cluster_info, rewrite_route
from rmqproxy.proxy.upstream import UpstreamError

from ..server.harness import _Port
from .harness import make_proxy

FASTJSON_ROUTE = (
    b'{"brokerDatas":[{"brokerAddrs":{0:"10.1.0.1:10911",1:"10.1.0.3:10911"},"brokerName":"broker-a",'
    b'"cluster":"DefaultCluster"},{"brokerAddrs":{0:"10.1.0.2:10911"},"brokerName":"broker-b","cluster":"DefaultCluster"}],'
    b'"filterServerTable":{"10.1.0.1:10911":["10.1.0.7:9999"]},"queueDatas":[{"brokerName":"broker-a","perm":6,'
    b'"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
)
STANDARD_ROUTE = (
    b'{"brokerDatas":[{"brokerAddrs":{"0":"10.1.0.1:10911"},"brokerName":"broker-a","cluster":"c",'
    b'"enableActingMaster":false,"zoneName":"z"}],"filterServerTable":{},"queueDatas":[],'
    b'"topicQueueMappingByBroker":{"broker-a":{"x":1}}}'
)


def _directory(*, fast: bool = False) -> NodeDirectory:
    """Ports 20001-20010; without fast ports unless asked, so that nodes take the ports in order."""
    return NodeDirectory(range(20001, 20011), "127.0.0.1", lambda node, port: _Port("127.0.0.1", port), fast=fast)


def test_a_fastjson_route_comes_back_in_fastjson_with_local_addresses() -> None:
    nodes = _directory()
    out = rewrite_route(FASTJSON_ROUTE, nodes.localize)
    assert b'{0:"127.0.0.1:20001",1:"127.0.0.1:20002"}' in out
    assert b'{0:"127.0.0.1:20003"}' in out
    assert b'"filterServerTable":{"127.0.0.1:20001":["10.1.0.7:9999"]}' in out
    assert nodes.get("broker-a", 1).upstream == "10.1.0.3:10911"


def test_a_standard_route_stays_standard_and_keeps_fields_the_proxy_does_not_know() -> None:
    out = json.loads(rewrite_route(STANDARD_ROUTE, _directory().localize))
    assert out["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:20001"}
    assert out["brokerDatas"][0]["zoneName"] == "z" and out["topicQueueMappingByBroker"] == {"broker-a": {"x": 1}}


def test_cluster_info_is_rewritten_and_its_nodes_listed() -> None:
    body = b'{"brokerAddrTable":{"broker-b":{"brokerAddrs":{0:"10.1.0.2:10911"},"brokerName":"broker-b"}},' \
           b'"clusterAddrTable":{"DefaultCluster":["broker-b"]}}'
    assert cluster_nodes(body) == [("broker-b", 0, "10.1.0.2:10911")]
    assert b'{0:"127.0.0.1:20001"}' in rewrite_cluster_info(body, _directory().localize)


def test_a_broker_keeps_its_port_and_follows_a_new_address() -> None:
    nodes = _directory()
    nodes.prime([("broker-b", 0, "b:1"), ("broker-a", 0, "a:1")])  # sorted: a gets the first port
    assert nodes.localize("broker-a", 0, "a:2") == "127.0.0.1:20001"
    assert nodes.get("broker-a", 0).upstream == "a:2"
    assert nodes.localize("broker-b", 0, "b:1") == "127.0.0.1:20002"


def test_the_port_range_is_a_bound() -> None:
    nodes = NodeDirectory(range(20001, 20002), "127.0.0.1", lambda node, port: _Port("127.0.0.1", port), fast=False)
    nodes.localize("broker-a", 0, "a:1")
    with pytest.raises(NoFreePort):
        nodes.localize("broker-b", 0, "b:1")


def test_with_fast_ports_each_node_has_its_port_minus_2_and_no_fast_port_is_another_s_port() -> None:
    listened: list[tuple[str, int]] = []

    def listen(node, port):
        listened.append((node.name, port))
        return _Port("127.0.0.1", port)

    nodes = NodeDirectory(range(20001, 20011), "127.0.0.1", listen)
    nodes.prime([(name, 0, f"{name}:1") for name in ("a", "b", "c", "d")])
    assert [(n.name, n.port, n.fast_port) for n in nodes] == [
        ("a", 20003, 20001), ("b", 20004, 20002), ("c", 20007, 20005), ("d", 20008, 20006)]
    assert listened == [("a", 20003), ("a", 20001), ("b", 20004), ("b", 20002), ("c", 20007), ("c", 20005),
                        ("d", 20008), ("d", 20006)]  # fmt: skip
    assert nodes.localize("a", 0, "a:1") == "127.0.0.1:20003"  # routes name the main port
    with pytest.raises(NoFreePort):  # 20009/20010 have no fast port in the range
        nodes.localize("e", 0, "e:1")


def test_a_node_whose_fast_port_is_taken_moves_on_and_frees_its_main_listener() -> None:
    stopped: list[int] = []

    class Port(_Port):
        def stopListening(self) -> None:
            stopped.append(self.port)

    def listen(node, port):
        if port == 20001:
            raise CannotListenError("127.0.0.1", port, OSError("in use"))
        return Port("127.0.0.1", port)

    nodes = NodeDirectory(range(20001, 20011), "127.0.0.1", listen)
    assert nodes.localize("a", 0, "a:1") == "127.0.0.1:20004"
    assert stopped == [20003] and nodes.get("a", 0).fast_port == 20002


def test_port_ranges() -> None:
    assert parse_port_range("", 9876) == range(9877, 9977)
    assert parse_port_range("10911-10920", 9876) == range(10911, 10921)
    for bad in ("10911", "a-b", "10920-10911", "0-5"):
        with pytest.raises(ValueError):
            parse_port_range(bad, 9876)


@pytest.mark.parametrize("body", [b"[]", b'{"brokerDatas":[{"brokerName":"a"}]}', b'{"brokerDatas":[{"brokerName":"a",'
                                  b'"brokerAddrs":{"x":"h:1"}}]}', b"{not json"])  # fmt: skip
def test_a_malformed_route_is_an_error(body: bytes) -> None:
    with pytest.raises(BodyError):
        rewrite_route(body, _directory().localize)


class _NameServers:
    """Stands in for the upstream name servers: answers each request with ``answer``, or fails."""

    def __init__(self, answer=None, error: str | None = None) -> None:
        self.answer, self.error, self.asked = answer, error, []

    def request(self, command):
        self.asked.append(command)
        if self.error:
            return defer.fail(UpstreamError(self.error))
        return defer.succeed(command.response(0, body=self.answer))

    def close(self) -> None:
        pass


def _ask(proxy, code: int, **ext: str):
    results = []
    request = RemotingCommand(code=code, opaque=77, ext_fields=ext or None)
    proxy.front.request(request, None).addCallback(results.append)
    return results[0]


def test_the_name_server_port_answers_routes_with_local_addresses_under_the_client_s_opaque(tmp_path) -> None:
    proxy, reactor, _ = make_proxy(tmp_path, proxy_broker_ports="20001-20010")
    proxy.front.namesrvs = _NameServers(FASTJSON_ROUTE)
    answer = _ask(proxy, RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="T")
    # by default each node's fast port (port - 2) comes from the range too: 20003 (fast 20001), 20004 (fast 20002)
    assert answer.opaque == 77 and b'{0:"127.0.0.1:20003",1:"127.0.0.1:20004"}' in answer.body
    other = _ask(proxy, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    assert other.body == FASTJSON_ROUTE  # anything else passes through untouched


def test_no_name_server_answering_is_a_system_error_with_the_reason(tmp_path) -> None:
    proxy, reactor, _ = make_proxy(tmp_path)
    proxy.front.namesrvs = _NameServers(error="cannot connect to 10.1.0.9:9876: refused")
    answer = _ask(proxy, RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="T")
    assert answer.code == ResponseCode.SYSTEM_ERROR and "refused" in answer.remark


def test_keys_proxy_mode_does_not_use_are_named_at_start(tmp_path) -> None:
    proxy, reactor, _ = make_proxy(tmp_path, flush_disk_type="SYNC_FLUSH", extra={"brokerRole": "ASYNC_MASTER"})
    proxy.front.namesrvs = _NameServers(error="not started")
    seen = []
    globalLogPublisher.addObserver(seen.append)
    try:
        proxy.start()
    finally:
        globalLogPublisher.removeObserver(seen.append)
    warnings = [e for e in seen if e.get("log_level") == LogLevel.warn and "keys" in e]
    assert [e["keys"] for e in warnings if "does not use" in e["log_format"]] == ["brokerRole, flushDiskType"]
