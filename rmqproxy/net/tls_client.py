"""TLS on the connections rmqproxy dials, as the Java client speaks it (docs/operations.md, "TLS").

The keys are the Java client's (4.9.x ``TlsSystemConfig``, ``TlsHelper``). ``tls.enable`` turns TLS on
for every connection dialed, name servers and brokers alike. With ``tls.test.mode.enable=true`` (the
default, a key shared with the server side) the client presents no certificate and checks none.
With it false, it presents ``tls.client.certPath`` with ``tls.client.keyPath`` (encrypted with
``tls.client.keyPassword`` if set) when given, and checks the server's certificate chain only with
``tls.client.authServer=true``: against ``tls.client.trustCertPath``, or the system's CAs when that is
blank. The host name is not checked: the Java client does not check it either. ``tls.config.file``
overrides every one of these keys but ``tls.enable``, as in the Java client.

Where the Java client silently gives less than a key asks for, the start stops instead: ``authServer``,
a trust file or a client certificate under test mode (ignored there), a trust file without
``authServer`` (ignored), a certificate, key or trust file that does not load (the Java client then
connects in plain TCP), and ``tls.enable=true`` in the file while the configuration's is false (not
read from there).

A dial is ready once its handshake is done; a handshake that fails, or does not finish within the
dial's timeout, fails the dial with its reason.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

from zope.interface import implementer

from twisted.internet import defer
from twisted.internet.interfaces import IOpenSSLClientConnectionCreator, IProtocolFactory, IStreamClientEndpoint
from twisted.protocols.tls import BufferingTLSTransport, TLSMemoryBIOFactory
from twisted.logger import Logger
from twisted.python.failure import Failure

from .tls import TlsError, config_file_keys, private_key

__all__ = ["UpstreamTls"]

log = Logger()

#: tls.config.file keys the client side reads, and the fields they set (as ``TlsHelper`` does).
_FILE_KEYS = {
    "tls.test.mode.enable": "test_mode",
    "tls.client.certPath": "cert_path",
    "tls.client.keyPath": "key_path",
    "tls.client.keyPassword": "key_password",
    "tls.client.authServer": "auth_server",
    "tls.client.trustCertPath": "trust_cert_path",
}
_BOOLEANS = ("test_mode", "auth_server")
#: What the Java client ignores under test mode (it presents no certificate and checks none).
_UNUSED_IN_TEST_MODE = ("cert_path", "key_path", "auth_server", "trust_cert_path")


@dataclasses.dataclass(frozen=True)
class UpstreamTls:
    """The TLS of the connections rmqproxy dials (``enable`` False: plain TCP)."""

    enable: bool = False
    test_mode: bool = True
    cert_path: str = ""
    key_path: str = ""
    key_password: str = ""
    auth_server: bool = False
    trust_cert_path: str = ""

    @classmethod
    def of(cls, config: Any) -> UpstreamTls:
        """The settings of ``config``, ``tls.config.file`` (if it is a file) overriding all but ``tls.enable``; checked."""
        values: dict[str, Any] = {
            "enable": config.tls_enable, "test_mode": config.tls_test_mode,
            "cert_path": config.tls_client_cert_path, "key_path": config.tls_client_key_path,
            "key_password": config.tls_client_key_password, "auth_server": config.tls_client_auth_server,
            "trust_cert_path": config.tls_client_trust_cert_path,
        }  # fmt: skip
        keys = config_file_keys(config)
        if _java_bool(keys.get("tls.enable", "")) and not config.tls_enable:
            raise TlsError("tls.config.file sets tls.enable=true, which is not read from that file (as in the Java "
                           "client), and tls.enable is false: set it in the configuration (--tls-enable true), or "
                           "remove it from the file")  # fmt: skip
        for key, field in _FILE_KEYS.items():
            if key in keys:
                values[field] = _java_bool(keys[key]) if field in _BOOLEANS else keys[key].strip()
        settings = cls(**values)
        settings.check()
        return settings

    def check(self) -> None:
        """Raise TlsError where these settings would give less than they ask for, or their files do not load."""
        if not self.enable:
            return
        if self.test_mode:
            given = [key for key, field in _FILE_KEYS.items() if field in _UNUSED_IN_TEST_MODE and getattr(self, field)]
            if given:
                raise TlsError(f"{', '.join(given)}: not used while tls.test.mode.enable=true (the Java client ignores "
                               "them too: it presents no certificate and checks none); set tls.test.mode.enable=false "
                               "(the server side then serves tls.server.certPath and tls.server.keyPath)")  # fmt: skip
            return
        if self.trust_cert_path and not self.auth_server:
            raise TlsError("tls.client.trustCertPath is set but tls.client.authServer is false: upstream certificates "
                           "would not be checked (as in the Java client); set tls.client.authServer=true")  # fmt: skip
        if bool(self.cert_path) != bool(self.key_path):
            raise TlsError("a client certificate needs both tls.client.certPath and tls.client.keyPath")
        _ = self.context  # a file that does not load stops the start, not the first dial

    @functools.cached_property
    def context(self) -> Any:
        """The client's ``OpenSSL.SSL.Context``, built once."""
        from OpenSSL import SSL

        ctx = SSL.Context(SSL.TLS_METHOD)
        ctx.set_min_proto_version(SSL.TLS1_2_VERSION)
        if self.test_mode:
            return ctx
        loading = ""  # what is being loaded, for the error
        try:
            if self.cert_path:
                loading = f"tls.client.certPath {self.cert_path}"
                ctx.use_certificate_chain_file(self.cert_path)
                loading = f"tls.client.keyPath {self.key_path}"
                ctx.use_privatekey(private_key(Path(self.key_path), self.key_password))
                ctx.check_privatekey()
            if self.auth_server:
                if self.trust_cert_path:
                    loading = f"tls.client.trustCertPath {self.trust_cert_path}"
                    ctx.load_verify_locations(self.trust_cert_path)
                else:
                    loading = "the system's CA certificates"
                    ctx.set_default_verify_paths()
                ctx.set_verify(SSL.VERIFY_PEER, _verified)
        except (SSL.Error, OSError, ValueError, TypeError) as exc:
            raise TlsError(f"upstream TLS: {loading} does not load: {exc}") from None
        return ctx

    def connect(self, endpoint: IStreamClientEndpoint, factory: IProtocolFactory, clock: Any,
                timeout_s: float) -> defer.Deferred:  # fmt: skip
        """Connect ``endpoint`` with TLS around what ``factory`` builds: a Deferred of that protocol,
        fired once the handshake is done (``clock``: the reactor); fails with TlsError when the
        handshake fails or takes longer than ``timeout_s``."""
        tls = _UpstreamFactory(_Creator(self.context), factory, clock, timeout_s)
        return endpoint.connect(tls).addCallback(lambda wrapper: wrapper.ready)


def _java_bool(text: str) -> bool:
    """Java's ``Boolean.parseBoolean``."""
    return text.strip().lower() == "true"


#: TLS alert descriptions (RFC 8446, 6.2) a server refusing a handshake commonly sends.
_ALERTS = {40: "handshake_failure", 42: "bad_certificate", 43: "unsupported_certificate", 44: "certificate_revoked",
           45: "certificate_expired", 46: "certificate_unknown", 48: "unknown_ca", 70: "protocol_version",
           80: "internal_error", 116: "certificate_required"}  # fmt: skip
#: OpenSSL's commonest certificate verification errors (``X509_V_ERR_*``).
_VERIFY_ERRORS = {9: "not yet valid", 10: "expired", 18: "self-signed and not trusted",
                  19: "a self-signed certificate in the chain is not trusted",
                  20: "its issuer is not trusted (not in tls.client.trustCertPath)",
                  21: "the chain does not lead to a trusted certificate"}  # fmt: skip


@implementer(IOpenSSLClientConnectionCreator)
class _Creator:
    """One client ``SSL.Connection`` per dial, on the shared context, telling its TLS protocol how
    the handshake goes."""

    def __init__(self, context: Any) -> None:
        self.context = context

    def clientConnectionForTLS(self, tls: _Handshaking) -> Any:  # noqa: N802 (Twisted's name)
        from OpenSSL import SSL

        conn = SSL.Connection(self.context, None)
        conn.set_app_data(tls)
        conn.set_info_callback(_info)
        conn.set_connect_state()
        return conn


def _info(conn: Any, where: int, ret: int) -> None:
    """OpenSSL's progress report: a finished handshake, or an alert from the server, is told to
    the connection's TLS protocol."""
    from OpenSSL import SSL

    if where & SSL.SSL_CB_HANDSHAKE_DONE:
        conn.get_app_data().handshake_done()
    elif (where & SSL.SSL_CB_READ_ALERT) == SSL.SSL_CB_READ_ALERT and ret & 0xFF:  # an alert read; 0: close_notify
        alert = _ALERTS.get(ret & 0xFF, f"alert {ret & 0xFF}")
        conn.get_app_data().refused(f"the server refused it (TLS {alert})")


def _verified(conn: Any, cert: Any, errno: int, depth: int, ok: int) -> bool:
    """OpenSSL's verdict on one certificate of the server's chain, kept as the reason when it fails."""
    if not ok:
        subject = cert.to_cryptography().subject.rfc4514_string() or "(no subject)"
        why = _VERIFY_ERRORS.get(errno, f"OpenSSL verify error {errno}")
        conn.get_app_data().refused(f"the server's certificate does not verify: {subject} (depth {depth}): {why}")
    return bool(ok)


class _Handshaking(BufferingTLSTransport):
    """A dialed TLS connection whose ``ready`` fires with the protocol it wraps once its handshake
    is done, or fails with the reason it never was."""

    factory: _UpstreamFactory

    def __init__(self, factory: _UpstreamFactory, wrapped: Any, _connectWrapped: bool = True) -> None:  # noqa: N803
        super().__init__(factory, wrapped, _connectWrapped)
        self.ready: defer.Deferred = defer.Deferred()
        self.why = ""  # why the handshake failed, once known
        self._timer: Any = None

    def makeConnection(self, transport: Any) -> None:  # noqa: N802
        self._timer = self.factory.clock.callLater(self.factory.timeout_s, self._too_slow)
        super().makeConnection(transport)

    def handshake_done(self) -> None:
        """OpenSSL finished the handshake (from inside its call: ``ready`` fires a turn later)."""
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
            self.factory.clock.callLater(0, self._fire)
        self._timer = None

    def refused(self, why: str) -> None:
        """The handshake failed, for this reason (the first one given is kept)."""
        self.why = self.why or why

    def _fire(self) -> None:
        if not self.ready.called and self.connected:
            self.ready.callback(self.wrappedProtocol)

    def _too_slow(self) -> None:
        self._timer = None
        self.refused(f"it did not finish within {self.factory.timeout_s:g} s")
        self.abortConnection()

    def connectionLost(self, reason: Failure) -> None:  # noqa: N802
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        super().connectionLost(reason)
        if not self.ready.called:
            why = self.why or f"the connection closed first ({reason.getErrorMessage()}): does the peer serve TLS?"
            self.ready.errback(TlsError(f"TLS handshake failed: {why}"))
        elif self.why:  # TLS 1.3: a server checks a client's certificate after the client is done
            log.warn("TLS connection to {peer} closed: {why}", peer=self.transport.getPeer(), why=self.why)


class _UpstreamFactory(TLSMemoryBIOFactory):
    """TLS around ``wrapped``'s protocol, on the client side, for one dial."""

    protocol = _Handshaking

    def __init__(self, creator: _Creator, wrapped: IProtocolFactory, clock: Any, timeout_s: float) -> None:
        super().__init__(creator, True, wrapped, clock=clock)
        self.clock = clock
        self.timeout_s = timeout_s
