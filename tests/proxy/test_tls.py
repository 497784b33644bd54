"""TLS on both sides of proxy mode, in memory (nothing listens, nothing sleeps).

Client side: the proxy's name-server port and broker listeners serve TLS per ``tls.server.mode``
as ``serve`` does (rmqproxy/net/tls.py); an enforcing port closes a plain client and logs why.
Upstream side: the ``Dialer`` speaks TLS with the Java client's keys (rmqproxy/net/tls_client.py)
to a TLS server on the other end of two ``StringTransport``s; a dial is ready once its handshake is
done, and one whose handshake fails or stalls fails with the reason. tests/proxy/test_via_tls.py
runs the same with real Java clients and a TLS-enforcing Apache broker.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.logger import globalLogPublisher

from codec.codes import RequestCode as C
from codec.command import RemotingCommand
from rmqproxy.cli import main
from rmqproxy.core.config import Config
from rmqproxy.net.tls import TlsError, TlsSettings, sniffing_factory
from rmqproxy.net.tls_client import UpstreamTls
from rmqproxy.net.transport import Connection
from rmqproxy.proxy.server import ProxyServer
from rmqproxy.proxy.upstream import Dialer, UpstreamError

from ..security.test_tls import Link, write_certificate
from .harness import FakeBroker, make_proxy

ENFORCING_LINE = "plain TCP, but tls.server.mode is enforcing"


def pair(directory: Path) -> tuple[str, str]:
    """A fresh self-signed certificate and its key in ``directory`` (PEM paths)."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = write_certificate(directory)
    return str(cert), str(key)


# -- the client side: the proxy's ports ---------------------------------------------------------------


def logged(fn: Any) -> list[str]:
    """The log lines (formatted) written while ``fn()`` runs."""
    from twisted.logger import formatEvent

    seen: list[dict] = []
    globalLogPublisher.addObserver(seen.append)
    try:
        fn()
    finally:
        globalLogPublisher.removeObserver(seen.append)
    return [formatEvent(event) for event in seen]


def enforcing_proxy(tmp_path: Path) -> tuple[ProxyServer, Any, Any, Any]:
    """A started proxy in enforcing mode with one broker node: (proxy, reactor, name-server port
    factory, broker listener factory)."""
    proxy, reactor, _ = make_proxy(tmp_path, tls_mode="enforcing", listen_port=9876, proxy_broker_ports="20001-20010")
    proxy.start()  # its name servers are never dialed: the fake reactor cannot connect
    assert proxy.front.nodes.localize("broker-a", 0, "10.1.0.1:10911") == "127.0.0.1:20003"
    return proxy, reactor, reactor.factories[9876], reactor.factories[20003]


def test_enforcing_ports_close_a_plain_client_and_log_why(tmp_path) -> None:
    proxy, reactor, namesrv, broker = enforcing_proxy(tmp_path)
    fast = reactor.factories[20001]  # the node's fast port: its port (20003) - 2
    for factory in (namesrv, broker, fast):
        link = Link(factory, reactor, tls=False)
        lines = logged(link.route)
        assert link.server_end.disconnecting and not link.client.answers
        assert sum(ENFORCING_LINE in line for line in lines) == 1, lines
    assert proxy.sessions == {}  # no session, no upstream dial for a refused client


def test_a_tls_client_is_relayed_upstream_through_an_enforcing_broker_listener(tmp_path) -> None:
    proxy, reactor, _, broker = enforcing_proxy(tmp_path)
    link = Link(broker, reactor, tls=True)
    link.pump()  # the handshake: the client's connection and its session now exist
    (session,) = proxy.sessions.values()
    upstream = FakeBroker(session, reactor)
    link.client.ask_route()
    link.pump()
    (relayed,) = upstream.requests(C.GET_ROUTEINFO_BY_TOPIC)
    assert relayed.ext_fields["topic"] == "TBW102"
    upstream.answer(relayed, 0, body=b"{}")
    link.pump()
    assert [a.code for a in link.client.answers] == [0]
    assert b"TBW102" not in link.server_end.value() + link.client_end.value()  # nothing in the clear


def test_disabled_leaves_the_proxy_s_ports_plain(tmp_path) -> None:
    proxy, reactor, _ = make_proxy(tmp_path, tls_mode="disabled", listen_port=9876)
    proxy.start()
    assert type(reactor.factories[9876]).__name__ == "_ConnectionFactory"


# -- the upstream side: the Dialer ---------------------------------------------------------------------


def test_tls_enable_puts_every_dial_of_the_proxy_on_tls(tmp_path) -> None:
    assert make_proxy(tmp_path)[0].dialer.tls is None  # the Java client's default: plain TCP
    proxy = make_proxy(tmp_path, tls_enable=True)[0]
    assert proxy.dialer.tls == UpstreamTls(enable=True) and proxy.front.namesrvs._link.dialer is proxy.dialer


def _answering(request: RemotingCommand, _conn: Connection) -> RemotingCommand:
    return request.response(0, "from the TLS server")


class Upstream:
    """A dial by a TLS ``Dialer`` to a TLS server (``server``: its TlsSettings), over two
    StringTransports the test pumps. ``result`` is what the dial gave (a Connection or a Failure)."""

    def __init__(self, tls: UpstreamTls, server: TlsSettings, timeout_s: float = 5.0) -> None:
        self.reactor = MemoryReactorClock()
        self.dialer = Dialer(self.reactor, max_frame_bytes=1 << 20, timeout_s=timeout_s, tls=tls)
        self.result: Any = None
        self.dialer.dial("10.1.0.1:10911", lambda command, conn: None).addBoth(self._dialed)
        _host, _port, factory, _timeout, _bind = self.reactor.tcpClients[-1]
        self.client = factory.buildProtocol(None)
        self.client_end = StringTransport()
        self.client.makeConnection(self.client_end)
        plain = _Serving(self.reactor)
        self.server = sniffing_factory(plain, server, self.reactor).buildProtocol(None)
        self.server_end = StringTransport()
        self.server.makeConnection(self.server_end)

    def _dialed(self, result: Any) -> None:
        self.result = result

    def pump(self) -> None:
        for _ in range(50):
            self.reactor.advance(0)
            up, down = self.client_end.value(), self.server_end.value()
            self.client_end.clear()
            self.server_end.clear()
            if not up and not down:
                return
            if up and not self.server_end.disconnecting:
                self.server.dataReceived(up)
            if down and not self.client_end.disconnecting:
                self.client.dataReceived(down)
        raise AssertionError("the two ends kept talking")

    def lose(self) -> None:
        """Once either end closed, both learn it, as the kernel would tell them."""
        from twisted.internet.error import ConnectionLost
        from twisted.python.failure import Failure

        if self.client_end.disconnecting or self.server_end.disconnecting:
            for end, proto in ((self.client_end, self.client), (self.server_end, self.server)):
                if end.connected:
                    end.connected = False
                    proto.connectionLost(Failure(ConnectionLost("closed")))

    def ask(self) -> RemotingCommand:
        """A request over the dialed connection (once the handshake is done), and its answer."""
        self.pump()
        assert isinstance(self.result, Connection), self.result
        answers: list[RemotingCommand] = []
        self.result.request(RemotingCommand(code=C.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": "T"}), 5).addCallback(answers.append)
        self.pump()
        return answers[0]

    def error(self) -> str:
        self.pump()
        self.lose()
        assert self.result is not None and not isinstance(self.result, Connection), self.result
        self.result.trap(UpstreamError)
        return self.result.getErrorMessage()


class _Serving:
    """The TLS server's plain factory: connections answering every request SUCCESS."""

    def __init__(self, clock: Any) -> None:
        self.clock = clock

    def buildProtocol(self, addr: Any) -> Connection:  # noqa: N802
        return Connection(_answering, self.clock, max_frame_bytes=1 << 20)

    def doStart(self) -> None:  # noqa: N802
        pass

    def doStop(self) -> None:  # noqa: N802
        pass


def test_a_dial_is_ready_once_its_handshake_is_done_and_nothing_goes_in_the_clear() -> None:
    up = Upstream(UpstreamTls(enable=True), TlsSettings(mode="enforcing"))
    assert up.result is None  # connected, not yet shaken hands
    up.pump()
    assert isinstance(up.result, Connection)
    assert up.ask().remark == "from the TLS server"


def test_the_server_certificate_is_checked_with_auth_server(tmp_path) -> None:
    cert, key = pair(tmp_path / "server")
    other, _ = pair(tmp_path / "other")
    served = TlsSettings(mode="enforcing", test_mode=False, cert_path=cert, key_path=key)
    trusting = UpstreamTls(enable=True, test_mode=False, auth_server=True, trust_cert_path=cert)
    assert Upstream(trusting, served).ask().code == 0
    wrong = UpstreamTls(enable=True, test_mode=False, auth_server=True, trust_cert_path=other)
    error = Upstream(wrong, served).error()
    assert error.startswith("cannot connect to 10.1.0.1:10911: TLS handshake failed: the server's certificate does "
                            "not verify"), error


def test_a_client_certificate_is_presented_when_the_server_requires_one(tmp_path) -> None:
    client_cert, client_key = pair(tmp_path / "client")
    requiring = TlsSettings(mode="enforcing", need_client_auth="require", trust_cert_path=client_cert)
    presenting = UpstreamTls(enable=True, test_mode=False, cert_path=client_cert, key_path=client_key)
    assert Upstream(presenting, requiring).ask().code == 0
    anonymous = Upstream(UpstreamTls(enable=True, test_mode=False), requiring)
    anonymous.pump()  # TLS 1.3: the client is done before the server has checked it
    failed: list[Any] = []
    lines = logged(lambda: (anonymous.result.request(RemotingCommand(code=C.GET_ROUTEINFO_BY_TOPIC), 5)
                            .addErrback(failed.append), anonymous.pump(), anonymous.lose()))  # fmt: skip
    assert failed and "closed before answering" in failed[0].getErrorMessage()
    assert any("certificate_required" in line for line in lines), lines


def test_a_handshake_that_does_not_finish_fails_the_dial_at_the_timeout() -> None:
    up = Upstream(UpstreamTls(enable=True), TlsSettings(mode="enforcing"), timeout_s=3.0)
    up.reactor.advance(2.9)
    assert up.result is None
    up.reactor.advance(0.2)  # nothing was pumped: the server never answered the ClientHello
    up.lose()
    assert "did not finish within 3 s" in up.result.getErrorMessage()


def test_a_plain_server_fails_the_dial() -> None:
    up = Upstream(UpstreamTls(enable=True), TlsSettings(mode="disabled"))
    assert "TLS handshake failed: the connection closed first" in up.error()


# -- the keys -------------------------------------------------------------------------------------------


def test_tls_config_file_overrides_the_client_keys_but_tls_enable(tmp_path) -> None:
    cert, key = pair(tmp_path)
    props = tmp_path / "tls.properties"
    props.write_text(f"tls.test.mode.enable=false\ntls.client.certPath={cert}\ntls.client.keyPath={key}\n"
                     f"tls.client.authServer=TRUE\ntls.client.trustCertPath={cert}\ntls.enable=false\n")  # fmt: skip
    settings = UpstreamTls.of(Config(tls_enable=True, tls_config_file=str(props)))
    assert settings == UpstreamTls(enable=True, test_mode=False, cert_path=cert, key_path=key, auth_server=True,
                                   trust_cert_path=cert)  # fmt: skip
    props.write_text("tls.enable=true\n")
    with pytest.raises(TlsError, match="not read from that file"):
        UpstreamTls.of(Config(tls_config_file=str(props)))


@pytest.mark.parametrize(("settings", "error"), [
    ({"auth_server": True}, "tls.client.authServer: not used while tls.test.mode.enable=true"),
    ({"cert_path": "c.pem", "key_path": "k.pem"}, "tls.client.certPath, tls.client.keyPath: not used"),
    ({"trust_cert_path": "ca.pem"}, "tls.client.trustCertPath: not used"),
    ({"test_mode": False, "trust_cert_path": "ca.pem"}, "tls.client.authServer is false"),
    ({"test_mode": False, "cert_path": "c.pem"}, "needs both"),
    ({"test_mode": False, "auth_server": True, "trust_cert_path": "/nonexistent.pem"}, "does not load"),
    ({"test_mode": False, "cert_path": "/nonexistent.pem", "key_path": "/nonexistent.key"}, "does not load"),
])  # fmt: skip
def test_settings_that_would_protect_less_than_they_say_are_refused(settings: dict, error: str) -> None:
    with pytest.raises(TlsError, match=error):
        UpstreamTls(enable=True, **settings).check()
    UpstreamTls(enable=False, **settings).check()  # off: nothing is used, nothing promised


def test_the_proxy_command_takes_the_tls_keys_and_refuses_a_start_they_cannot_keep(tmp_path) -> None:
    help_text = CliRunner().invoke(main, ["proxy", "--help"]).output
    for flag in ("--tls-server-mode", "--tls-enable", "--tls-client-auth-server", "--tls-client-trust-cert-path",
                 "--tls-client-cert-path", "--tls-client-key-path", "--tls-client-key-password"):  # fmt: skip
        assert flag in help_text
    assert "--tls-enable" not in CliRunner().invoke(main, ["serve", "--help"]).output
    result = CliRunner().invoke(main, ["proxy", "--namesrv-addr", "127.0.0.1:1", "--metrics-prom-exporter-port", "0",
                                       "--tls-enable", "true", "--tls-client-auth-server", "true",
                                       "--pull-log-path", str(tmp_path / "pulls")])  # fmt: skip
    assert result.exit_code != 0 and "tls.test.mode.enable=true" in result.output
