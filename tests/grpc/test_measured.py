"""gRPC receives measured like pulls: one pull event per queue a receive served (``protocol`` =
``grpc``), hold and service time split, and the metrics a gRPC consumer needs (rpc latency by
protocol, messages in flight, redeliveries, DLQ forwards)."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import generate_latest

from tests.grpc.harness import make_grpc_server
from tests.grpc.test_service import TOPIC, _delivered, _held, _message, _receive_request, _send


@pytest.fixture
def served(tmp_path: Path):
    server, reactor, client = make_grpc_server(tmp_path)
    server.topics.ensure(TOPIC, 2)
    events: list = []
    server.grpc.listeners.append(events.append)
    yield server, reactor, client, events
    client.close()
    server.stop()


def _scrape(server, reactor) -> str:
    reactor.run_thread_calls(timeout=0.1)
    return generate_latest(server.registry).decode()


def test_a_held_receive_is_one_pull_event_with_its_hold_and_wake(served) -> None:
    server, reactor, client, events = served
    future = client.receive_start(_receive_request(wait_s=20.0), timeout=30)
    _held(server, reactor)
    reactor.advance(1.5)
    _send(client, _message(body=b"x", mid="01M"))
    [message] = _delivered(client.pump(future))
    [event] = events
    assert (event.protocol, event.held, event.wake, event.code, event.msgs) == ("grpc", True, "arrival", "OK", 1)
    assert event.hold_ms == pytest.approx(1500, abs=1) and event.suspend_ms == 20_000
    assert event.queue_id == message.system_properties.queue_id and event.group == "G"


def test_an_empty_receive_is_one_event_for_queue_minus_one(served) -> None:
    server, reactor, client, events = served
    future = client.receive_start(_receive_request(wait_s=2.0), timeout=30)
    _held(server, reactor)
    reactor.advance(2.0)
    client.pump(future)
    [event] = events
    assert (event.queue_id, event.code, event.wake, event.msgs) == (-1, "MESSAGE_NOT_FOUND", "timeout", 0)
    assert event.hold_ms == pytest.approx(2000, abs=1)


def test_metrics_show_grpc_latency_in_flight_messages_and_redeliveries(served) -> None:
    server, reactor, client, events = served
    _send(client, _message(body=b"x", mid="01M"))
    client.pump(client.receive_start(_receive_request(invisible_s=5.0)))
    text = _scrape(server, reactor)
    assert 'protocol_type="grpc",request_code="send_message",response_code="ok"' in text
    assert 'protocol_type="grpc",request_code="receive_message",response_code="ok"' in text
    assert f'rmqproxy_pop_invisible_messages{{consumer_group="G",topic="{TOPIC}"}} 1.0' in text
    reactor.advance(5.0)
    client.pump(client.receive_start(_receive_request(invisible_s=5.0)))
    text = _scrape(server, reactor)
    assert f'rmqproxy_pop_redeliveries_total{{consumer_group="G",topic="{TOPIC}"}} 1.0' in text
