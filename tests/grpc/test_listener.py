"""Starting and refusing the gRPC listener: the key, its default, the modes that refuse it."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from rmqproxy.core.config import load
from rmqproxy.grpc_wire import pb, rpc
from rmqproxy.proxy.server import ProxyServer
from tests.grpc.harness import make_grpc_server
from tests.server.harness import FakeReactor, make_server


def test_grpc_server_port_defaults_to_8081_and_zero_turns_it_off(tmp_path: Path) -> None:
    assert load().grpc_server_port == 8081
    server, _ = make_server(tmp_path, grpc_server_port=0)
    assert server.grpc_front is None
    server.stop()


def test_proxy_mode_refuses_a_grpc_port_it_does_not_serve(tmp_path: Path) -> None:
    conf = tmp_path / "proxy.conf"
    conf.write_text("namesrvAddr=127.0.0.1:9876\ngrpcServerPort=8081\n")
    with pytest.raises(ValueError, match="proxy mode does not serve gRPC"):
        ProxyServer(load(conf), FakeReactor())
    conf.write_text("namesrvAddr=127.0.0.1:9876\ngrpcServerPort=0\n")
    ProxyServer(load(conf), FakeReactor())  # 0 says "off": nothing refused
    ProxyServer(load(None, {"namesrv_addr": "127.0.0.1:9876"}), FakeReactor())  # not set at all


def test_a_taken_grpc_port_stops_the_start(tmp_path: Path) -> None:
    import socket

    from rmqproxy.net.grpc_front import GrpcStartError

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        with pytest.raises(GrpcStartError):
            make_server(tmp_path, grpc_server_port=holder.getsockname()[1], tls_mode="disabled")


@pytest.mark.parametrize("mode", ["permissive", "enforcing"])
def test_tls_clients_are_served_and_plain_ones_only_when_permissive(tmp_path: Path, mode: str) -> None:
    server, reactor, client = make_grpc_server(tmp_path, tls_mode=mode)
    try:
        server.topics.ensure("T", 1)
        key, chain = server.tls.pem()
        secure = grpc.secure_channel(f"127.0.0.1:{server.grpc_front.bound_port}",
                                     grpc.ssl_channel_credentials(root_certificates=chain),
                                     options=[("grpc.ssl_target_name_override",
                                               "rmqproxy self-signed (tls.test.mode.enable)")])  # fmt: skip
        stub = rpc.MessagingServiceStub(secure)
        request = pb.QueryRouteRequest(topic=pb.Resource(name="T"))
        answer = client.pump(client.start(lambda: stub.QueryRoute(request, metadata=client.metadata, timeout=10)))
        assert answer.status.code == pb.OK
        secure.close()
        plain = client.start(lambda: client.stub.QueryRoute(request, metadata=client.metadata, timeout=5))
        if mode == "permissive":
            assert client.pump(plain).status.code == pb.OK
        else:
            with pytest.raises(grpc.RpcError):
                client.pump(plain)
    finally:
        client.close()
        server.stop()
