"""TLS on the remoting port (rmqproxy/net/tls.py): the first byte tells TLS from plain TCP, per
``tls.server.mode``; handshakes run in memory between two ``StringTransport``s, nothing sleeps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from twisted.internet import ssl
from twisted.internet.address import IPv4Address
from twisted.internet.protocol import ClientFactory, Protocol
from twisted.internet.testing import StringTransport
from twisted.protocols.tls import TLSMemoryBIOFactory

from codec.codes import RequestCode as C
from codec.command import RemotingCommand
from codec.peer import RemotingPeer
from rmqproxy.cli import main
from rmqproxy.core.config import Config
from rmqproxy.broker.server import _Factory
from rmqproxy.net.tls import TlsError, TlsSettings, _self_signed, sniffing_factory

from ..server.harness import make_server


class Remoting(Protocol):
    """The client's remoting end: what it reads, decoded."""

    def __init__(self) -> None:
        self.peer = RemotingPeer()
        self.answers: list[RemotingCommand] = []
        self.handshake_failed = False

    def dataReceived(self, data: bytes) -> None:  # noqa: N802
        self.answers += [incoming.command for incoming in self.peer.receive(data)]

    def connectionLost(self, reason: Any) -> None:  # noqa: N802
        self.handshake_failed = "SSL" in str(reason.value) or "TLS" in str(reason.value)

    def ask_route(self) -> None:
        _, data = self.peer.request(RemotingCommand(code=C.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": "TBW102"}))
        self.transport.write(data)


class Link:
    """A client and the server's listener, joined by two StringTransports the test pumps."""

    def __init__(self, factory: Any, reactor: Any, *, tls: bool, client_options: Any = None) -> None:
        self.reactor = reactor
        self.server_end = StringTransport(peerAddress=IPv4Address("TCP", "10.0.0.5", 40001))
        self.server = factory.buildProtocol(self.server_end.getPeer())
        self.server.makeConnection(self.server_end)
        self.client = Remoting()
        self.client_end = StringTransport()
        if tls:
            options = client_options or ssl.CertificateOptions()  # the Java client checks no certificate either
            wrapper = TLSMemoryBIOFactory(options, True, ClientFactory.forProtocol(lambda: self.client), clock=reactor)
            self.outer = wrapper.buildProtocol(None)
        else:
            self.outer = self.client
        self.outer.makeConnection(self.client_end)

    def pump(self) -> None:
        for _ in range(50):
            self.reactor.advance(0)  # TLS sends small writes a reactor turn later
            up, down = self.client_end.value(), self.server_end.value()
            self.client_end.clear()
            self.server_end.clear()
            if not up and not down:
                return
            if up and not self.server_end.disconnecting:
                self.server.dataReceived(up)
            if down:
                self.outer.dataReceived(down)

    def route(self) -> RemotingCommand | None:
        self.client.ask_route()
        self.pump()
        return self.client.answers[-1] if self.client.answers else None


def listener(tmp_path: Path, **tls: Any) -> tuple[Any, Any, Any]:
    server, reactor = make_server(tmp_path)
    settings = TlsSettings(**tls)
    settings.check()
    return server, reactor, sniffing_factory(_Factory(server), settings, reactor)


def test_permissive_serves_tls_and_plain_clients_on_one_port(tmp_path) -> None:
    server, reactor, factory = listener(tmp_path, mode="permissive")
    try:
        secure, plain = Link(factory, reactor, tls=True), Link(factory, reactor, tls=False)
        assert secure.route().code == 0 and plain.route().code == 0
        assert b"TBW102" not in secure.server_end.value() + secure.client_end.value()  # nothing in the clear
        assert len(server.connections) == 2
    finally:
        server.stop()


def test_enforcing_closes_a_plain_client_and_serves_tls(tmp_path) -> None:
    server, reactor, factory = listener(tmp_path, mode="enforcing")
    try:
        plain = Link(factory, reactor, tls=False)
        assert plain.route() is None and plain.server_end.disconnecting
        assert Link(factory, reactor, tls=True).route().code == 0
    finally:
        server.stop()


def test_disabled_serves_plain_tcp_as_it_is(servers, tmp_path) -> None:
    server, _ = servers(tmp_path)
    plain = _Factory(server)
    assert sniffing_factory(plain, TlsSettings(mode="disabled"), None) is plain


def write_certificate(directory: Path, password: bytes | None = None) -> tuple[Path, Path]:
    cert, key = _self_signed()
    cert_path, key_path = directory / "server.pem", directory / "server.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    encryption = serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption))
    return cert_path, key_path


def test_the_configured_certificate_is_served_and_an_encrypted_key_opens_with_its_password(tmp_path) -> None:
    cert_path, key_path = write_certificate(tmp_path, b"key-pass")
    server, reactor, factory = listener(tmp_path, test_mode=False, cert_path=str(cert_path), key_path=str(key_path),
                               key_password="key-pass")  # fmt: skip
    try:
        served = ssl.Certificate.loadPEM(cert_path.read_bytes())
        trusting = ssl.CertificateOptions(verify=True, caCerts=[served.original], requireCertificate=True)
        assert Link(factory, reactor, tls=True, client_options=trusting).route().code == 0  # it is that certificate
    finally:
        server.stop()
    with pytest.raises(TlsError, match="does not load"):
        TlsSettings(test_mode=False, cert_path=str(cert_path), key_path=str(key_path), key_password="wrong").check()


def test_a_required_client_certificate_is_required(tmp_path) -> None:
    ca_path, _ = write_certificate(tmp_path)
    server, reactor, factory = listener(tmp_path, need_client_auth="require", trust_cert_path=str(ca_path))
    try:
        anonymous = Link(factory, reactor, tls=True)
        assert anonymous.route() is None
    finally:
        server.stop()


@pytest.mark.parametrize(("settings", "error"), [
    ({"mode": "sometimes"}, "tls.server.mode"),
    ({"test_mode": False}, "needs tls.server.certPath"),
    ({"test_mode": False, "cert_path": "/nonexistent.pem", "key_path": "/nonexistent.key"}, "does not load"),
    ({"need_client_auth": "maybe"}, "need.client.auth"),
])  # fmt: skip
def test_settings_that_cannot_be_served_are_refused(settings: dict, error: str) -> None:
    with pytest.raises(TlsError, match=error):
        TlsSettings(**settings).check()


def test_tls_config_file_overrides_every_key_but_the_mode(tmp_path) -> None:
    cert_path, key_path = write_certificate(tmp_path)
    props = tmp_path / "tls.properties"
    props.write_text(f"tls.server.mode=disabled\ntls.test.mode.enable=false\ntls.server.certPath={cert_path}\n"
                     f"tls.server.keyPath={key_path}\n")  # fmt: skip
    settings = TlsSettings.of(Config(tls_mode="enforcing", tls_config_file=str(props)))
    assert (settings.mode, settings.test_mode, settings.cert_path) == ("enforcing", False, str(cert_path))


def test_a_start_with_a_certificate_that_does_not_load_is_refused(tmp_path) -> None:
    result = CliRunner().invoke(main, ["serve", "--tls-test-mode-enable", "false", "--tls-server-cert-path",
                                       str(tmp_path / "missing.pem"), "--tls-server-key-path", str(tmp_path / "missing.key"),
                                       "--store-path-root-dir", str(tmp_path / "s"), "--metrics-prom-exporter-port", "0"])  # fmt: skip
    assert result.exit_code != 0 and "does not load" in result.output


def test_replies_to_a_tls_connection_never_take_the_direct_socket_write() -> None:
    """The reply fast path writes to a TCP socket itself; a TLS transport forwards unknown
    attributes to the TCP one, so without this check its replies would leave in the clear."""
    import socket

    from twisted.internet import reactor, tcp

    from rmqproxy.net.sockwrite import can_write_directly

    ours, theirs = socket.socketpair()
    try:
        raw = tcp.Connection(ours, Protocol(), reactor)
        wrapped = TLSMemoryBIOFactory(ssl.CertificateOptions(), False, ClientFactory.forProtocol(Protocol)).buildProtocol(None)
        wrapped.makeConnection(raw)
        assert can_write_directly(raw) and hasattr(wrapped.transport, "writeSomeData")
        assert not can_write_directly(wrapped) and not can_write_directly(wrapped.wrappedProtocol.transport)
    finally:
        ours.close()
        theirs.close()
