"""TLS on the remoting ports, as a reference broker serves it (docs/operations.md, "TLS").

``tls.server.mode`` is the reference's: ``disabled`` serves plain TCP only, ``permissive`` (the
default) TLS and plain TCP on the same port, ``enforcing`` TLS only. A connection is told apart by
its first byte, as the reference's handshake handler does: 0x16 opens a TLS handshake; anything
else is plain remoting, served in permissive mode and closed (and logged) in enforcing mode.

The certificate is ``tls.server.certPath`` (PEM chain) with ``tls.server.keyPath`` (PEM, encrypted
with ``tls.server.keyPassword`` if set). With ``tls.test.mode.enable=true`` (the reference's
default) a self-signed certificate made at the first TLS connection is served instead, and the
paths are not read, as the reference does; the Java client does not verify the server's
certificate unless told to. ``tls.server.need.client.auth`` (none, optional, require) asks for a
client certificate, checked against ``tls.server.trustCertPath``. ``tls.config.file`` (a Java
properties file) overrides every ``tls.*`` key but the mode, as in the reference.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
from pathlib import Path
from typing import Any

from zope.interface import implementer

from twisted.internet.interfaces import IOpenSSLContextFactory
from twisted.internet.protocol import Factory, Protocol
from twisted.logger import Logger

from ..core.config import parse_properties

__all__ = ["TlsError", "TlsSettings", "config_file_keys", "private_key", "sniffing_factory"]

log = Logger()

MODES = ("disabled", "permissive", "enforcing")
CLIENT_AUTH = ("none", "optional", "require")
_HANDSHAKE = 0x16  # a TLS record of type handshake: a ClientHello's first byte


class TlsError(ValueError):
    """TLS settings that cannot be served (startup stops)."""


@dataclasses.dataclass(frozen=True)
class TlsSettings:
    mode: str = "permissive"
    test_mode: bool = True
    cert_path: str = ""
    key_path: str = ""
    key_password: str = ""
    need_client_auth: str = "none"
    trust_cert_path: str = ""

    @classmethod
    def of(cls, config: Any) -> TlsSettings:
        """The settings of ``config``, ``tls.config.file`` (if readable) overriding all but the mode."""
        values = {"test_mode": config.tls_test_mode, "cert_path": config.tls_cert_path, "key_path": config.tls_key_path,
                  "key_password": config.tls_key_password, "need_client_auth": config.tls_need_client_auth,
                  "trust_cert_path": config.tls_trust_cert_path}  # fmt: skip
        keys = config_file_keys(config)
        names = {"tls.test.mode.enable": "test_mode", "tls.server.certPath": "cert_path",
                 "tls.server.keyPath": "key_path", "tls.server.keyPassword": "key_password",
                 "tls.server.need.client.auth": "need_client_auth", "tls.server.trustCertPath": "trust_cert_path"}  # fmt: skip
        for key, field in names.items():
            if key in keys:
                text = keys[key].strip()
                values[field] = text.lower() == "true" if field == "test_mode" else text
        settings = cls(mode=config.tls_mode.strip().lower(), **values)
        settings.check()
        return settings

    def check(self) -> None:
        if self.mode not in MODES:
            raise TlsError(f"tls.server.mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        if self.need_client_auth.lower() not in CLIENT_AUTH:
            raise TlsError(f"tls.server.need.client.auth must be one of {', '.join(CLIENT_AUTH)}")
        if self.mode != "disabled" and not self.test_mode:
            if not self.cert_path or not self.key_path:
                raise TlsError("TLS without tls.test.mode.enable needs tls.server.certPath and tls.server.keyPath")
            _ = self.context  # a certificate, key or password that does not load stops the start, not a client

    @functools.cached_property
    def context(self) -> Any:
        """The server's ``OpenSSL.SSL.Context``, built once (at the start-up check when it reads
        files, else at the first TLS connection)."""
        from OpenSSL import SSL

        ctx = SSL.Context(SSL.TLS_METHOD)
        ctx.set_min_proto_version(SSL.TLS1_2_VERSION)
        try:
            if self.test_mode:
                cert, key = self._test_pair
                ctx.use_certificate(cert)
                ctx.use_privatekey(key)
            else:
                ctx.use_certificate_chain_file(self.cert_path)
                ctx.use_privatekey(private_key(Path(self.key_path), self.key_password))
                ctx.check_privatekey()
            auth = self.need_client_auth.lower()
            if auth != "none":
                if self.trust_cert_path:
                    ctx.load_verify_locations(self.trust_cert_path)
                flags = SSL.VERIFY_PEER | (SSL.VERIFY_FAIL_IF_NO_PEER_CERT if auth == "require" else 0)
                ctx.set_verify(flags, lambda _conn, _cert, _errno, _depth, ok: bool(ok))
        except (SSL.Error, OSError, ValueError, TypeError) as exc:
            raise TlsError(f"TLS certificate or key does not load: {exc}") from None
        return ctx


    @functools.cached_property
    def _test_pair(self) -> tuple[Any, Any]:
        """The self-signed certificate and key of test mode, one per server for every port."""
        return _self_signed()

    def pem(self) -> tuple[bytes, bytes]:
        """(private key, certificate chain) as PEM, the key unencrypted: what a gRPC server takes."""
        from cryptography.hazmat.primitives import serialization

        if self.test_mode:
            cert, key = self._test_pair
            chain = cert.public_bytes(serialization.Encoding.PEM)
        else:
            try:
                key = private_key(Path(self.key_path), self.key_password)
                chain = Path(self.cert_path).read_bytes()
            except (OSError, ValueError, TypeError) as exc:
                raise TlsError(f"TLS certificate or key does not load: {exc}") from None
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())  # fmt: skip
        return key_pem, chain

    def trust_pem(self) -> bytes | None:
        """The CA certificates client certificates are checked with (PEM), when client
        certificates are asked for."""
        if self.need_client_auth.lower() == "none" or not self.trust_cert_path:
            return None
        try:
            return Path(self.trust_cert_path).read_bytes()
        except OSError as exc:
            raise TlsError(f"tls.server.trustCertPath: {exc}") from None


def config_file_keys(config: Any) -> dict[str, str]:
    """The keys of ``tls.config.file`` (Java properties), none when it is not a file; one that
    cannot be read stops the start."""
    path = Path(config.tls_config_file) if config.tls_config_file else None
    if path is None or not path.is_file():
        return {}
    try:
        return parse_properties(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise TlsError(f"tls.config.file {path}: {exc}") from None


def private_key(path: Path, password: str) -> Any:
    """The PEM private key at ``path``, decrypted with ``password`` if it is encrypted."""
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    return load_pem_private_key(path.read_bytes(), password.encode() if password else None)


def _self_signed() -> tuple[Any, Any]:
    """A fresh self-signed certificate and its key (what the reference's test mode serves)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "rmqproxy self-signed (tls.test.mode.enable)")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=365)).sign(key, hashes.SHA256()))  # fmt: skip
    return cert, key


@implementer(IOpenSSLContextFactory)
class _Context:
    """The context factory Twisted's TLS wants."""

    def __init__(self, settings: TlsSettings) -> None:
        self.settings = settings

    def getContext(self) -> Any:  # noqa: N802 (Twisted's name)
        return self.settings.context


class _Sniffer(Protocol):
    """A connection until its first byte says TLS or plain; then everything goes to the protocol
    chosen (the remoting connection, or TLS wrapping it)."""

    def __init__(self, factory: _SniffingFactory, addr: Any) -> None:
        self.sniffing = factory
        self.addr = addr
        self.inner: Protocol | None = None

    def dataReceived(self, data: bytes) -> None:  # noqa: N802
        if self.inner is None:
            if not data:
                return
            tls = data[0] == _HANDSHAKE
            if not tls and self.sniffing.settings.mode == "enforcing":
                log.warn("closing {peer}: plain TCP, but tls.server.mode is enforcing", peer=self.transport.getPeer())
                self.transport.abortConnection()
                return
            chosen = self.sniffing.tls if tls else self.sniffing.plain
            self.inner = chosen.buildProtocol(self.addr)
            self.inner.makeConnection(self.transport)
            self.dataReceived = self.inner.dataReceived  # type: ignore[method-assign]  # no look on every later read
        self.inner.dataReceived(data)

    def connectionLost(self, reason: Any) -> None:  # noqa: N802
        if self.inner is not None:
            self.inner.connectionLost(reason)


class _SniffingFactory(Factory):
    def __init__(self, plain: Factory, settings: TlsSettings, clock: Any) -> None:
        self.plain = plain
        self.settings = settings
        self.clock = clock  # Twisted's TLS gathers small writes and sends them a reactor turn later
        self._tls: Factory | None = None

    @property
    def tls(self) -> Factory:
        """TLS around ``plain``, made at the first TLS connection (a self-signed certificate is
        made then, not by every start)."""
        if self._tls is None:
            from twisted.protocols.tls import TLSMemoryBIOFactory

            self._tls = TLSMemoryBIOFactory(_Context(self.settings), False, self.plain, clock=self.clock)
        return self._tls

    def buildProtocol(self, addr: Any) -> _Sniffer:  # noqa: N802
        return _Sniffer(self, addr)

    def doStart(self) -> None:  # noqa: N802
        self.plain.doStart()

    def doStop(self) -> None:  # noqa: N802
        self.plain.doStop()


def sniffing_factory(plain: Factory, settings: TlsSettings, clock: Any) -> Factory:
    """``plain`` as ``settings`` serve it: as it is when TLS is disabled, else behind a first-byte
    look that hands TLS connections to TLS wrapping it (``clock``: the reactor)."""
    return plain if settings.mode == "disabled" else _SniffingFactory(plain, settings, clock)
