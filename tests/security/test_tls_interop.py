"""TLS with the real Java client (issue 29): ``rmqproxy serve`` in permissive and enforcing mode.

tests/security/test_tls.py runs handshakes in memory; this module shows that the unmodified Apache
RocketMQ clients (4.9.8 and 5.5.0, the scenario program's two lines) talk TLS to the server the way
they talk to a reference broker. A client turns TLS on with the JVM system property
``-Dtls.enable=true`` (``ClientConfig.useTLS``) and, by default, checks no server certificate.

The server serves a certificate this module makes (``cryptography``; ``tls.test.mode.enable=false``
with ``tls.server.certPath`` and ``tls.server.keyPath``), not the built-in self-signed one. Each
client is the restart scenario run until MESSAGES messages went through: a producer sending sync
messages and a push consumer receiving them, in one JVM.

* permissive: a TLS client and a plain client, at the same time on the same port, both get every
  message through;
* enforcing: a TLS client gets every message through; a plain client cannot even fetch a route (its
  set-up sends fail: the server closes each connection at its first byte, and logs it);
* a Python ``ssl`` client completes a handshake, verifying the served certificate is the one
  generated here, and gets a remoting answer over it; in enforcing mode a plain socket is closed.

``RMQ_SCENARIO_TARGET=apache`` runs the same tests against the reference 4.9.7 name server and
broker as a baseline. The reference reads ``tls.*`` only from system properties (or
``tls.config.file``), not from broker.conf, so they go to both JVMs as ``-D`` options; its broker,
a client of its name server, also gets ``-Dtls.enable=true`` so that it can register in enforcing
mode.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import socket
import ssl
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from codec.codes import RequestCode as C
from codec.command import RemotingCommand
from tests.interop.conftest import program, scenario_line  # noqa: F401 (fixtures)

from ..interop.scenario_checks import explain, no_error, start_server
from ..interop.scenario_runner import RunningScenario, ScenarioProgram, unique_name
from ..interop.server import ScenarioServer
from ..interop.wire import roundtrip

pytestmark = pytest.mark.interop

TARGET = os.environ.get("RMQ_SCENARIO_TARGET", "rmqproxy")
TLS_CLIENT = ["-Dtls.enable=true"]  # ClientConfig.useTLS, on both lines
MESSAGES = 50  # sent and received by each client before it is stopped
ENFORCING_LINE = "plain TCP, but tls.server.mode is enforcing"  # rmqproxy's log line for a refused plain client


# -- the certificate and the servers ------------------------------------------------------------------


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return loopback_certificate(tmp_path_factory.mktemp("tls"))


def loopback_certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost (PEM) and its key (PEM, PKCS8), in ``directory``."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "rmqproxy TLS interop test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    names = x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1)).add_extension(names, critical=False)
            .sign(key, hashes.SHA256()))  # fmt: skip
    cert_path, key_path = directory / "server.pem", directory / "server.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))  # fmt: skip
    return cert_path, key_path


def tls_server(mode: str, certificate: tuple[Path, Path]) -> ScenarioServer:
    """The server under test in ``mode``, serving ``certificate`` (no tls.config.file read)."""
    cert_path, key_path = certificate
    tls = {"tls.server.mode": mode, "tls.test.mode.enable": "false", "tls.server.certPath": str(cert_path),
           "tls.server.keyPath": str(key_path), "tls.config.file": str(cert_path.parent / "absent.properties")}  # fmt: skip
    if TARGET == "rmqproxy":
        return start_server(TARGET, broker_conf=tls)
    from ..interop.apache_broker import TEST_JVM

    props = [f"-D{k}={v}" for k, v in tls.items()]
    return start_server(TARGET, jvm={"namesrv": [*TEST_JVM["namesrv"], *props],
                                     "broker": [*TEST_JVM["broker"], *props, *TLS_CLIENT]})  # fmt: skip


def _server_fixture(mode: str) -> Callable[..., Iterator[ScenarioServer]]:
    @pytest.fixture(scope="module")
    def server(certificate: tuple[Path, Path]) -> Iterator[ScenarioServer]:
        srv = tls_server(mode, certificate)
        try:
            yield srv
        finally:
            srv.close()

    return server


permissive = _server_fixture("permissive")
enforcing = _server_fixture("enforcing")


# -- the Java clients ---------------------------------------------------------------------------------


def start_client(program: ScenarioProgram, server: ScenarioServer, *, tls: bool) -> RunningScenario:
    """A producer and a push consumer (the restart scenario) on a fresh topic, TLS or plain."""
    topic = unique_name("Tls" if tls else "Plain", program.line)
    return program.start("restart", namesrv=server.namesrv, topic=topic, group=f"{topic}-cg", interval_ms=5,
                         jvm_args=TLS_CLIENT if tls else ())  # fmt: skip


def run_through(runs: dict[str, RunningScenario]) -> dict[str, dict[str, Any]]:
    """Wait until each client (all running at once) has received MESSAGES messages; stop them and
    return their results."""
    try:
        for run in runs.values():
            run.wait_progress("received", MESSAGES, timeout=90)
        return {kind: run.finish(timeout=60) for kind, run in runs.items()}
    finally:
        for run in runs.values():
            run.kill()


def assert_all_through(r: dict[str, Any], server: ScenarioServer, what: str) -> None:
    """Every send succeeded and every acknowledged message arrived."""
    no_error(r, server)
    fields = ("sent_ok", "send_not_ok", "send_failed", "send_failures", "distinct", "missing", "missing_keys")
    assert r["sent_ok"] >= MESSAGES and r["send_failed"] == 0 and r["send_not_ok"] == 0, \
        f"{what}\n" + explain(r, server, *fields)
    assert r["missing"] == 0, f"{what}: {r['missing']} acknowledged messages never arrived\n" + explain(r, server, *fields)


def server_log(server: ScenarioServer) -> str:
    return server.log_tail(10**7)


# -- 1. permissive ------------------------------------------------------------------------------------


def test_permissive_serves_tls_and_plain_clients_on_one_port(program: ScenarioProgram,
                                                             permissive: ScenarioServer) -> None:
    """A TLS client and a plain client, at the same time, on the same name server and broker port."""
    results = run_through({"tls": start_client(program, permissive, tls=True),
                           "plain": start_client(program, permissive, tls=False)})  # fmt: skip
    for kind, r in results.items():
        assert_all_through(r, permissive, f"{kind} client, permissive mode")
    print({kind: (r["sent_ok"], r["distinct"], r["scenario_elapsed_ms"]) for kind, r in results.items()})


# -- 2. enforcing -------------------------------------------------------------------------------------


def test_enforcing_serves_a_tls_client(program: ScenarioProgram, enforcing: ScenarioServer) -> None:
    before = server_log(enforcing).count(ENFORCING_LINE)
    r = run_through({"tls": start_client(program, enforcing, tls=True)})["tls"]
    assert_all_through(r, enforcing, "TLS client, enforcing mode")
    if TARGET == "rmqproxy":  # none of its connections was taken for plain TCP
        assert server_log(enforcing).count(ENFORCING_LINE) == before, explain(r, enforcing)
    print(f"tls: sent_ok={r['sent_ok']} distinct={r['distinct']} elapsed_ms={r['scenario_elapsed_ms']}")


def test_enforcing_refuses_a_plain_client(program: ScenarioProgram, enforcing: ScenarioServer) -> None:
    """The plain client's route lookups fail (the server closes its connections), so its set-up
    sends fail and the scenario ends with that error before sending anything. rmqproxy resets a
    refused connection, and a 4.9.8 client's lookup fails at once (RemotingSendRequestException); the
    reference closes it, and the lookup fails after the client's 3 s timeout (RemotingTimeoutException)."""
    before = server_log(enforcing).count(ENFORCING_LINE)
    topic = unique_name("Plain", program.line)
    # stdin is closed: a producer that somehow got through would stop at once and report no error
    r = program.run("restart", namesrv=enforcing.namesrv, topic=topic, group=f"{topic}-cg", timeout=90)
    assert "error" in r and "sent_ok" not in r, explain(r, enforcing)
    assert "RemotingSendRequestException" in r["error"] or "RemotingTimeoutException" in r["error"] \
        or "RemotingConnectException" in r["error"], explain(r, enforcing, "error")
    if TARGET == "rmqproxy":
        assert server_log(enforcing).count(ENFORCING_LINE) > before, explain(r, enforcing, "error")
    print(f"plain: {r['error'][:160]} elapsed_ms={r['scenario_elapsed_ms']}")


# -- 3. the port speaks TLS (Python's ssl) -------------------------------------------------------------


def _host_port(addr: str) -> tuple[str, int]:
    host, port = addr.rsplit(":", 1)
    return host, int(port)


def route_request() -> RemotingCommand:
    return RemotingCommand(code=C.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": "TBW102"})


def tls_probe(server: ScenarioServer, certificate: tuple[Path, Path]) -> RemotingCommand:
    """A handshake that verifies the served certificate (the one generated here, for 127.0.0.1),
    then a route request over it: its answer."""
    context = ssl.create_default_context(cafile=str(certificate[0]))
    host, port = _host_port(server.namesrv)
    with socket.create_connection((host, port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname=host) as sock:  # fmt: skip
        assert sock.version() in ("TLSv1.2", "TLSv1.3")
        served = x509.load_der_x509_certificate(sock.getpeercert(binary_form=True))
        assert served == x509.load_pem_x509_certificate(certificate[0].read_bytes())
        return roundtrip(sock, route_request())


def test_permissive_port_speaks_tls_and_plain(permissive: ScenarioServer, certificate: tuple[Path, Path]) -> None:
    assert tls_probe(permissive, certificate).code == 0
    with socket.create_connection(_host_port(permissive.namesrv), timeout=10) as sock:
        assert roundtrip(sock, route_request()).code == 0


def test_enforcing_port_speaks_tls_and_closes_plain(enforcing: ScenarioServer, certificate: tuple[Path, Path]) -> None:
    assert tls_probe(enforcing, certificate).code == 0
    with socket.create_connection(_host_port(enforcing.namesrv), timeout=10) as sock:
        sock.sendall(route_request().encode())
        try:
            answer = sock.recv(65536)  # b"": closed, as the server does at the first plain byte
        except ConnectionResetError:
            answer = b""
    assert answer == b"", f"a plain client got {answer[:64]!r} in enforcing mode"
