"""TLS on both sides of the proxy, with real Java clients, in front of a TLS-enforcing Apache cluster.

One 4.9.7 name server and broker for the module, both with ``tls.server.mode=enforcing`` and the
certificate of tests/security/test_tls_interop.py (``tls.test.mode.enable=false``): the reference
reads its ``tls.*`` keys from ``-D`` system properties, and its broker speaks TLS to its name server.
In front of it, a proxy that enforces TLS on its own ports too, and dials the cluster with
``tls.enable=true``, checking the cluster's certificate (``tls.client.authServer=true`` against that
certificate as ``tls.client.trustCertPath``):

* a Java client with ``-Dtls.enable=true`` (4.9.8, the restart scenario: a producer and a push
  consumer) gets every message through, and no connection of it is taken for plain TCP;
* a plain client is closed at its first byte on the name-server port, a broker listener and its
  fast port, and each close is logged;
* a TLS client (Python's ``ssl``) gets routes that name the proxy, and a broker's answer through it;
* two more proxies show the upstream side matters: one without ``tls.enable`` cannot reach the
  cluster, and one that trusts another certificate refuses the cluster's, with the reason in the
  client's SYSTEM_ERROR remark.

tests/proxy/test_tls.py has the same, in memory.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from codec.bodies import TopicRouteData
from codec.codes import RequestCode as C
from codec.codes import ResponseCode
from codec.command import RemotingCommand
from codec.frame import FrameDecoder
from codec.headers import REQUEST_HEADERS
from rmqproxy.net.tls import _self_signed
from tests.interop.apache_broker import TEST_JVM, ApacheBroker
from tests.interop.scenario_runner import ScenarioProgram
from tests.interop.server import RunningProxy
from tests.interop.wire import roundtrip

from ..security.test_tls_interop import (
    ENFORCING_LINE, MESSAGES, TLS_CLIENT, assert_all_through, loopback_certificate, run_through, start_client,
)  # fmt: skip
from .proxied import ONLY_49, ProxiedCluster


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The cluster's certificate (for 127.0.0.1), which the proxy serves too, and its key."""
    return loopback_certificate(tmp_path_factory.mktemp("tls"))


def tls_keys(certificate: tuple[Path, Path]) -> dict[str, str]:
    """TLS only, serving ``certificate``; no tls.config.file read."""
    cert, key = certificate
    return {"tls.server.mode": "enforcing", "tls.test.mode.enable": "false", "tls.server.certPath": str(cert),
            "tls.server.keyPath": str(key), "tls.config.file": str(cert.parent / "absent.properties")}  # fmt: skip


@pytest.fixture(scope="module")
def cluster(certificate: tuple[Path, Path]) -> Iterator[ApacheBroker]:
    """The reference name server and broker, both enforcing TLS."""
    props = [f"-D{k}={v}" for k, v in tls_keys(certificate).items()]
    jvm = {"namesrv": [*TEST_JVM["namesrv"], *props], "broker": [*TEST_JVM["broker"], *props, *TLS_CLIENT]}
    with ApacheBroker(jvm=jvm) as broker:
        yield broker


@pytest.fixture(scope="module")
def proxied(cluster: ApacheBroker, certificate: tuple[Path, Path]) -> Iterator[ProxiedCluster]:
    """The proxy in front of it: TLS only to its clients, and TLS to the cluster, checking its certificate."""
    conf = {**tls_keys(certificate), "tls.enable": "true", "tls.client.authServer": "true",
            "tls.client.trustCertPath": str(certificate[0])}  # fmt: skip
    with ProxiedCluster(cluster, proxy_conf=conf) as server:  # type: ignore[arg-type]
        yield server


def _host_port(addr: str) -> tuple[str, int]:
    host, port = addr.rsplit(":", 1)
    return host, int(port)


def over_tls(addr: str, command: RemotingCommand, cafile: Path) -> RemotingCommand:
    """``command``'s answer over TLS at ``addr``, whose certificate must verify against ``cafile``."""
    context = ssl.create_default_context(cafile=str(cafile))
    host, port = _host_port(addr)
    with socket.create_connection((host, port), timeout=15) as raw, \
            context.wrap_socket(raw, server_hostname=host) as sock:  # fmt: skip
        return roundtrip(sock, command)


def plain(addr: str, command: RemotingCommand) -> RemotingCommand | None:
    """``command``'s answer over plain TCP at ``addr``, or None when the connection is closed first."""
    with socket.create_connection(_host_port(addr), timeout=15) as sock:
        sock.sendall(command.encode())
        decoder = FrameDecoder()
        while True:
            try:
                data = sock.recv(65536)
            except ConnectionResetError:
                return None
            if not data:
                return None
            frames = decoder.feed(data)
            if frames:
                return RemotingCommand.decode(frames[0])


def route_request(topic: str = "TBW102") -> RemotingCommand:
    return RemotingCommand(code=C.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": topic})


@ONLY_49
def test_a_tls_java_client_gets_every_message_through_to_an_enforcing_cluster(
        program: ScenarioProgram, proxied: ProxiedCluster) -> None:  # fmt: skip
    before = proxied.proxy.log_tail(10**7).count(ENFORCING_LINE)
    r = run_through({"tls": start_client(program, proxied, tls=True)})["tls"]
    assert_all_through(r, proxied, "TLS client through the proxy, TLS-enforcing cluster")
    assert proxied.proxy.log_tail(10**7).count(ENFORCING_LINE) == before  # no connection of it taken for plain
    print(f"tls via proxy: sent_ok={r['sent_ok']} distinct={r['distinct']} elapsed_ms={r['scenario_elapsed_ms']} "
          f"(of {MESSAGES} needed)")


def test_a_tls_client_gets_routes_naming_the_proxy_and_broker_answers_through_it(
        proxied: ProxiedCluster, certificate: tuple[Path, Path]) -> None:  # fmt: skip
    answer = over_tls(proxied.namesrv, route_request(), certificate[0])
    assert answer.code == ResponseCode.SUCCESS, answer
    (broker,) = TopicRouteData.from_json(answer.body).broker_datas
    assert broker.broker_addrs[0] == proxied.broker_addr  # the proxy's listener, not the broker
    header = REQUEST_HEADERS[C.GET_MAX_OFFSET]
    offset = RemotingCommand(code=C.GET_MAX_OFFSET, ext_fields=header.encode(header.cls(topic="TBW102", queue_id=0)))
    assert over_tls(proxied.broker_addr, offset, certificate[0]).code == ResponseCode.SUCCESS


def test_plain_clients_are_closed_at_every_port_and_each_close_is_logged(proxied: ProxiedCluster) -> None:
    host, port = _host_port(proxied.broker_addr)
    ports = [proxied.namesrv, proxied.broker_addr, f"{host}:{port - 2}"]  # name server, broker, its fast port
    before = proxied.proxy.log_tail(10**7).count(ENFORCING_LINE)
    assert [plain(addr, route_request()) for addr in ports] == [None, None, None]
    logged = proxied.proxy.log_tail(10**7).count(ENFORCING_LINE) - before
    assert logged == len(ports), proxied.proxy.log_tail()


def test_the_upstream_side_needs_tls_and_checks_the_cluster_s_certificate(
        cluster: ApacheBroker, tmp_path: Path) -> None:  # fmt: skip
    """Two proxies with plain client ports (so this test's client is plain): one without
    tls.enable (the cluster closes it), one trusting another certificate than the cluster's."""
    other = tmp_path / "other.pem"
    other.write_bytes(_self_signed()[0].public_bytes(serialization.Encoding.PEM))
    absent = str(tmp_path / "absent.properties")
    confs = {
        "plain upstream": {"tls.config.file": absent},
        "untrusted upstream": {"tls.config.file": absent, "tls.enable": "true", "tls.test.mode.enable": "false",
                               "tls.client.authServer": "true", "tls.client.trustCertPath": str(other)},
    }  # fmt: skip
    remarks = {}
    for what, conf in confs.items():
        with RunningProxy(cluster.namesrv, proxy_conf={"tls.server.mode": "disabled", **conf}) as proxy:
            answer = plain(proxy.namesrv, route_request())
            assert answer is not None and answer.code == ResponseCode.SYSTEM_ERROR, (what, answer, proxy.log_tail())
            remarks[what] = answer.remark
            assert "read the cluster from" in proxy.log_tail(), proxy.log_tail()  # the start says why, too
    print(remarks)
    assert "no upstream name server answered" in remarks["plain upstream"]
    assert "TLS handshake failed: the server's certificate does not verify" in remarks["untrusted upstream"]
