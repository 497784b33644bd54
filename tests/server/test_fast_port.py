"""The fast (VIP) port of ``serve``: the broker port - 2, served as the broker port is (rmqproxy/net/fastport.py)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from codec.bodies import TopicRouteData
from codec.codes import RequestCode as C
from codec.codes import ResponseCode as R
from rmqproxy.core.config import Config
from rmqproxy.net.fastport import FastPortTaken
from rmqproxy.broker.server import Server

from tests.implementations import child_env
from tests.interop.server import free_port

from .harness import Client, FakeReactor


def test_serve_listens_on_its_port_minus_2_with_the_main_port_s_factory(servers, tmp_path: Path) -> None:
    server, reactor = servers(tmp_path)
    assert [port for _, port in reactor.listening] == [9876, 9874]
    # one factory: the same dispatcher (ACL), TLS sniffing, connection set and reply-buffer bounds
    assert reactor.factories[9874] is reactor.factories[9876]


def test_a_fast_port_client_is_served_and_counted_with_the_others_while_routes_name_the_main_port(servers, tmp_path) -> None:
    server, reactor = servers(tmp_path, tls_mode="disabled")
    fast = Client(server, factory=reactor.factories[9874])
    main = Client(server, factory=reactor.factories[9876])
    assert fast.send_message("T").code == R.SUCCESS
    assert {fast.conn, main.conn} <= server.connections
    assert fast.conn.buffers is main.conn.buffers is server.reply_buffers
    route = TopicRouteData.from_json(fast.call(C.GET_ROUTEINFO_BY_TOPIC, topic="T").body)
    assert route.broker_datas[0].broker_addrs == {0: "127.0.0.1:9876"}


def test_with_a_broker_port_the_fast_port_is_that_port_minus_2(servers, tmp_path: Path) -> None:
    server, reactor = servers(tmp_path, broker_listen_port=10911)
    assert [port for _, port in reactor.listening] == [9876, 10911, 10909]


def test_fast_port_enable_false_serves_no_fast_port(servers, tmp_path: Path) -> None:
    server, reactor = servers(tmp_path, fast_port_enable=False)
    assert [port for _, port in reactor.listening] == [9876]


def test_a_broker_port_whose_fast_port_is_the_listen_port_is_refused() -> None:
    with pytest.raises(ValueError, match="fastPortEnable=false"):
        Config(listen_port=9876, broker_listen_port=9878)
    assert Config(listen_port=9876, broker_listen_port=9878, fast_port_enable=False).fast_port == 0


def test_a_taken_fast_port_stops_the_start_naming_the_port_and_the_key(tmp_path: Path) -> None:
    reactor = FakeReactor()
    reactor.taken.add(9874)
    server = Server(Config(store_path=str(tmp_path / "store"), listen_port=9876, metrics_port=0, grpc_server_port=0), reactor)
    with pytest.raises(FastPortTaken) as caught:
        server.start()
    text = str(caught.value)
    assert "9874" in text and "fastPortEnable=false" in text and "fast (VIP) port" in text
    server.stop()


def test_the_real_command_exits_when_its_fast_port_is_taken(tmp_path: Path) -> None:
    fast = free_port(also_free=(2,))
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", fast))
        holder.listen()
        proc = subprocess.run(
            [sys.executable, "-m", "rmqproxy.cli", "serve", "--bind-address", "127.0.0.1", "--listen-port",
             str(fast + 2), "--store-path-root-dir", str(tmp_path / "store"), "--metrics-prom-exporter-port", "0", "--grpc-server-port", "0"],
            capture_output=True, text=True, timeout=60, check=False, env=child_env(),
        )  # fmt: skip
    assert proc.returncode != 0
    assert f"fast (VIP) port 127.0.0.1:{fast}" in proc.stderr and "fastPortEnable=false" in proc.stderr
