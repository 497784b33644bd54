"""The gRPC front end with a real gRPC client (Python, plain text) against a server on a fake
reactor: routes, settings, sends with the 5.x type check, receives held to the tick of the fake
clock, acks, invisibility, the DLQ, and what is refused with which status."""

from __future__ import annotations

import queue
import time
from pathlib import Path

import grpc
import pytest

from rmqproxy.grpc_wire import pb
from tests.grpc.harness import GrpcClient, make_grpc_server

TOPIC = "GT"


@pytest.fixture
def served(tmp_path: Path):
    server, reactor, client = make_grpc_server(tmp_path)
    server.topics.ensure(TOPIC, 2)
    yield server, reactor, client
    client.close()
    server.stop()
    reactor.run_thread_calls(timeout=0.1)


def _message(topic: str = TOPIC, body: bytes = b"hello", *, mid: str = "01A", kind: int = pb.NORMAL, tag: str = "TagA",
             **system) -> pb.Message:  # fmt: skip
    m = pb.Message(topic=pb.Resource(name=topic), body=body)
    sp = m.system_properties
    sp.message_id, sp.message_type, sp.tag = mid, kind, tag
    for key, value in system.items():
        setattr(sp, key, value)
    return m


def _send(client: GrpcClient, *messages: pb.Message) -> pb.SendMessageResponse:
    return client.call("SendMessage", pb.SendMessageRequest(messages=list(messages)))


def _receive_request(group: str = "G", *, wait_s: float = 5.0, invisible_s: float | None = 15.0, batch: int = 16,
                     expression: str = "*") -> pb.ReceiveMessageRequest:  # fmt: skip
    req = pb.ReceiveMessageRequest(group=pb.Resource(name=group), message_queue=pb.MessageQueue(topic=pb.Resource(name=TOPIC)),
                                   batch_size=batch)  # fmt: skip
    req.filter_expression.type, req.filter_expression.expression = pb.TAG, expression
    if invisible_s is not None:
        req.invisible_duration.FromMilliseconds(int(invisible_s * 1000))
    req.long_polling_timeout.FromMilliseconds(int(wait_s * 1000))
    return req


def _delivered(responses: list) -> list:
    return [r.message for r in responses if r.HasField("message")]


def _status(responses: list):
    return next(r.status for r in responses if r.HasField("status"))


def _held(server, reactor, count: int = 1) -> None:
    """Pump the reactor until the server holds ``count`` receives."""
    deadline = time.monotonic() + 10
    while server.holds.count != count:
        assert time.monotonic() < deadline, f"holds {server.holds.count}, wanted {count}"
        reactor.run_thread_calls(timeout=0.01)


def test_query_route_lists_the_topics_queues_at_the_grpc_endpoint_with_its_type(served) -> None:
    server, reactor, client = served
    answer = client.call("QueryRoute", pb.QueryRouteRequest(topic=pb.Resource(name=TOPIC)))
    assert answer.status.code == pb.OK
    assert [q.id for q in answer.message_queues] == [0, 1]
    queue0 = answer.message_queues[0]
    assert queue0.permission == pb.READ_WRITE and list(queue0.accept_message_types) == [pb.NORMAL]
    assert queue0.broker.name == server.config.broker_name and queue0.broker.id == 0
    address = queue0.broker.endpoints.addresses[0]
    assert (address.host, address.port) == ("127.0.0.1", server.grpc_front.bound_port)
    missing = client.call("QueryRoute", pb.QueryRouteRequest(topic=pb.Resource(name="NoSuchTopic")))
    assert missing.status.code == pb.TOPIC_NOT_FOUND
    bad = client.call("QueryRoute", pb.QueryRouteRequest(topic=pb.Resource(name="bad topic!")))
    assert bad.status.code == pb.ILLEGAL_TOPIC


def test_a_call_without_a_client_id_is_refused(served) -> None:
    server, reactor, client = served
    fn = client.stub.QueryRoute
    future = client.start(lambda: fn(pb.QueryRouteRequest(topic=pb.Resource(name=TOPIC)), timeout=5))
    assert client.pump(future).status.code == pb.CLIENT_ID_REQUIRED


def _telemetry(client: GrpcClient, settings: pb.Settings) -> tuple[pb.TelemetryCommand, queue.Queue]:
    """Open a Telemetry stream, send ``settings``, return the server's answer and the request queue."""
    requests: queue.Queue = queue.Queue()
    requests.put(pb.TelemetryCommand(settings=settings))

    def feed():
        while (item := requests.get()) is not None:
            yield item

    stream = client.stub.Telemetry(feed(), metadata=client.metadata, timeout=30)
    first = client.pump(client.start(lambda: next(stream)))
    client.streams = getattr(client, "streams", []) + [(stream, requests)]
    return first, requests


def test_settings_come_back_with_the_servers_limits_and_heartbeats_need_them(served) -> None:
    server, reactor, client = served
    early = client.call("Heartbeat", pb.HeartbeatRequest(client_type=pb.PRODUCER))
    assert early.status.code == pb.UNRECOGNIZED_CLIENT_TYPE
    settings = pb.Settings(client_type=pb.PRODUCER, publishing=pb.Publishing(topics=[pb.Resource(name=TOPIC)]))
    answer, requests = _telemetry(client, settings)
    assert answer.status.code == pb.OK
    assert answer.settings.publishing.max_body_size == server.config.max_message_size
    assert answer.settings.backoff_policy.max_attempts == 3
    assert client.call("Heartbeat", pb.HeartbeatRequest(client_type=pb.PRODUCER)).status.code == pb.OK
    assert server.clients.producer_group(TOPIC)  # registered as its topic's producer, as the reference does
    requests.put(None)


def test_a_consumers_settings_carry_its_groups_attempts_and_backoff(served) -> None:
    server, reactor, client = served
    settings = pb.Settings(client_type=pb.SIMPLE_CONSUMER, subscription=pb.Subscription(group=pb.Resource(name="G")))
    answer, requests = _telemetry(client, settings)
    sub = answer.settings.subscription
    assert answer.status.code == pb.OK and sub.receive_batch_size == 32 and not sub.fifo
    assert answer.settings.backoff_policy.max_attempts == 17
    assert len(answer.settings.backoff_policy.customized_backoff.next) > 0
    requests.put(None)


def test_a_send_is_stored_and_received_then_acked(served) -> None:
    server, reactor, client = served
    sent = _send(client, _message(body=b"one", mid="01ONE"))
    assert sent.status.code == pb.OK and sent.entries[0].message_id == "01ONE"
    responses = client.pump(client.receive_start(_receive_request()))
    [message] = _delivered(responses)
    assert message.body == b"one" and message.system_properties.message_id == "01ONE"
    assert message.system_properties.delivery_attempt == 1 and message.system_properties.tag == "TagA"
    assert message.system_properties.invisible_duration.seconds == 15
    assert responses[-1].HasField("delivery_timestamp")
    handle = message.system_properties.receipt_handle
    ack = client.call("AckMessage", pb.AckMessageRequest(group=pb.Resource(name="G"), topic=pb.Resource(name=TOPIC),
                                                         entries=[pb.AckMessageEntry(message_id="01ONE", receipt_handle=handle)]))  # fmt: skip
    assert ack.status.code == pb.OK
    again = client.call("AckMessage", pb.AckMessageRequest(group=pb.Resource(name="G"), topic=pb.Resource(name=TOPIC),
                                                           entries=[pb.AckMessageEntry(message_id="01ONE", receipt_handle=handle)]))  # fmt: skip
    assert again.status.code == pb.INVALID_RECEIPT_HANDLE


def test_a_send_of_the_wrong_type_for_its_topic_is_refused(served) -> None:
    server, reactor, client = served
    fifo = _send(client, _message(mid="01F", message_group="g1"))
    assert fifo.status.code == pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    assert "expected type is NORMAL, but actual type is FIFO" in fifo.status.message


@pytest.mark.parametrize(("message", "code"), [
    (_message(body=b""), pb.MESSAGE_BODY_EMPTY),
    (_message(body=b"x" * (4 * 1024 * 1024 + 1)), pb.MESSAGE_BODY_TOO_LARGE),
    (_message(mid=""), pb.ILLEGAL_MESSAGE_ID),
    (_message(tag="a|b"), pb.ILLEGAL_MESSAGE_TAG),
    (_message(topic="NoSuchTopic"), pb.TOPIC_NOT_FOUND),
])  # fmt: skip
def test_bad_messages_are_refused_with_the_references_codes(served, message, code) -> None:
    server, reactor, client = served
    assert _send(client, message).status.code == code
    assert server.store.max_offset(TOPIC, 0) + server.store.max_offset(TOPIC, 1) == 0


#: Field 999 as a varint: no message of apache.rocketmq.v2 has it.
UNKNOWN_FIELD = b"\xb8\x3e\x01"


def test_unknown_fields_anywhere_in_a_request_are_refused_and_counted(served) -> None:
    server, reactor, client = served
    nested = _message(mid="01U")
    nested.system_properties.MergeFromString(UNKNOWN_FIELD)
    answer = _send(client, nested)
    assert answer.status.code == pb.BAD_REQUEST
    assert "SendMessageRequest.messages[0].system_properties#999" in answer.status.message
    top = pb.SendMessageRequest(messages=[_message(mid="01V")])
    top.MergeFromString(UNKNOWN_FIELD)
    assert client.call("SendMessage", top).status.code == pb.BAD_REQUEST
    reactor.run_thread_calls(timeout=0.1)
    assert server.rejections.counts.get("grpc_bad_request", 0) == 2
    assert server.store.max_offset(TOPIC, 0) + server.store.max_offset(TOPIC, 1) == 0
    assert _send(client, _message(mid="01W")).status.code == pb.OK


def test_an_empty_receive_is_answered_at_its_long_polling_timeout_exactly(served) -> None:
    server, reactor, client = served
    future = client.receive_start(_receive_request(wait_s=3.0), timeout=30)
    _held(server, reactor)
    reactor.advance(2.999)
    reactor.run_thread_calls(timeout=0.2)
    assert not future.done() and server.holds.count == 1
    reactor.advance(0.001)
    responses = client.pump(future)
    assert _status(responses).code == pb.MESSAGE_NOT_FOUND and server.holds.count == 0


def test_a_waiting_receive_is_woken_by_a_send(served) -> None:
    server, reactor, client = served
    future = client.receive_start(_receive_request(wait_s=20.0), timeout=30)
    _held(server, reactor)
    assert _send(client, _message(body=b"wake", mid="01W")).status.code == pb.OK
    [message] = _delivered(client.pump(future))
    assert message.body == b"wake"


def test_an_unacked_message_comes_back_with_its_attempt_counted(served) -> None:
    server, reactor, client = served
    _send(client, _message(body=b"again", mid="01AG"))
    [first] = _delivered(client.pump(client.receive_start(_receive_request(invisible_s=10.0))))
    future = client.receive_start(_receive_request(wait_s=20.0), timeout=30)
    _held(server, reactor)
    reactor.advance(10.0)
    [second] = _delivered(client.pump(future))
    assert second.system_properties.delivery_attempt == 2
    assert second.system_properties.receipt_handle != first.system_properties.receipt_handle


def test_change_invisible_duration_gives_a_new_handle_and_moves_the_return(served) -> None:
    server, reactor, client = served
    _send(client, _message(body=b"later", mid="01L"))
    [first] = _delivered(client.pump(client.receive_start(_receive_request(invisible_s=60.0))))
    request = pb.ChangeInvisibleDurationRequest(group=pb.Resource(name="G"), topic=pb.Resource(name=TOPIC),
                                                receipt_handle=first.system_properties.receipt_handle, message_id="01L")  # fmt: skip
    request.invisible_duration.FromSeconds(2)
    changed = client.call("ChangeInvisibleDuration", request)
    assert changed.status.code == pb.OK and changed.receipt_handle != first.system_properties.receipt_handle
    request.invisible_duration.FromSeconds(13 * 3600)
    assert client.call("ChangeInvisibleDuration", request).status.code == pb.ILLEGAL_INVISIBLE_TIME
    reactor.advance(2.0)
    [second] = _delivered(client.pump(client.receive_start(_receive_request())))
    assert second.body == b"later" and second.system_properties.delivery_attempt == 2


def test_forward_to_dead_letter_queue_moves_the_message(served) -> None:
    server, reactor, client = served
    _send(client, _message(body=b"dead", mid="01D"))
    [first] = _delivered(client.pump(client.receive_start(_receive_request())))
    answer = client.call("ForwardMessageToDeadLetterQueue", pb.ForwardMessageToDeadLetterQueueRequest(
        group=pb.Resource(name="G"), topic=pb.Resource(name=TOPIC), receipt_handle=first.system_properties.receipt_handle,
        message_id="01D", delivery_attempt=1, max_delivery_attempts=1))  # fmt: skip
    assert answer.status.code == pb.OK
    assert server.store.message_at("%DLQ%G", 0, 0).body == b"dead"
    assert server.pops.in_flight() == 0


def test_receive_checks_its_invisible_duration_and_group(served) -> None:
    server, reactor, client = served
    too_short = client.pump(client.receive_start(_receive_request(invisible_s=0.5)))
    assert _status(too_short).code == pb.ILLEGAL_INVISIBLE_TIME
    bad_group = client.pump(client.receive_start(_receive_request(group="bad group")))
    assert _status(bad_group).code == pb.ILLEGAL_CONSUMER_GROUP


def test_a_receive_whose_client_goes_away_stops_waiting(served) -> None:
    server, reactor, client = served
    call = client.stub.ReceiveMessage(_receive_request(wait_s=20.0), metadata=client.metadata, timeout=30)
    _held(server, reactor)
    call.cancel()
    _held(server, reactor, 0)
    assert server.pops.waiting() == 0


@pytest.mark.parametrize("method", ["UpdateOffset", "GetOffset", "QueryOffset", "RecallMessage"])
def test_offset_rpcs_are_refused_as_unimplemented_with_a_reason(served, method) -> None:
    server, reactor, client = served
    request = {"UpdateOffset": pb.UpdateOffsetRequest, "GetOffset": pb.GetOffsetRequest,
               "QueryOffset": pb.QueryOffsetRequest, "RecallMessage": pb.RecallMessageRequest}[method]()  # fmt: skip
    with pytest.raises(grpc.RpcError) as refused:
        client.call(method, request)
    assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED and "rmqproxy does not serve" in refused.value.details()


def test_a_connection_past_its_share_of_waiting_receives_is_told_to_slow_down(tmp_path: Path) -> None:
    server, reactor, client = make_grpc_server(tmp_path, max_held_pulls_per_connection=1)
    try:
        server.topics.ensure(TOPIC, 2)
        first = client.receive_start(_receive_request(wait_s=5.0), timeout=30)
        _held(server, reactor)
        second = client.pump(client.receive_start(_receive_request(wait_s=5.0), timeout=30))
        assert _status(second).code == pb.TOO_MANY_REQUESTS and "maxHeldPullsPerConnection" in _status(second).message
        reactor.advance(5.0)
        assert _status(client.pump(first)).code == pb.MESSAGE_NOT_FOUND
    finally:
        client.close()
        server.stop()


def test_a_held_receive_gives_way_at_max_held_pulls_with_too_many_requests(tmp_path: Path) -> None:
    """Issue 40: a connection holding every held pull gives way to a pull of one below its fair share:
    its newest waiting receive is answered TOO_MANY_REQUESTS (a 5.x client backs off on it) saying
    why, and counted as an ``over_fair_share`` rejection and an ``evicted`` wake."""
    from codec.codes import PullSysFlag
    from codec.codes import ResponseCode as R
    from tests.server.harness import Client

    server, reactor, client = make_grpc_server(tmp_path, max_held_pulls=2)
    try:
        server.topics.ensure(TOPIC, 2)
        first = client.receive_start(_receive_request(wait_s=5.0), timeout=30)
        _held(server, reactor)
        newest = client.receive_start(_receive_request(wait_s=5.0), timeout=30)
        _held(server, reactor, 2)
        other = Client(server, "other@1")
        opaque = other.pull_message(TOPIC, 0, sys_flag=PullSysFlag.SUSPEND, suspend_timeout_millis=2000)
        assert other.answer(opaque) is None and server.holds.count == 2
        status = _status(client.pump(newest))
        assert status.code == pb.TOO_MANY_REQUESTS
        assert "maxHeldPulls 2" in status.message and "fair share of 1" in status.message
        assert not first.done()
        reactor.run_thread_calls(timeout=0.1)  # the rejection is counted on the reactor
        assert server.rejections.counts == {"over_fair_share": 1} and server.holds.wakeups == {"evicted": 1}
        labels = {"topic": TOPIC, "consumer_group": "G", "wake": "evicted"}
        assert server.registry.get_sample_value("rmqproxy_hold_wakeups_total", labels) == 1
        assert server.pops.waiting() == 1
        reactor.advance(2.0)
        assert other.answer(opaque).code == R.PULL_NOT_FOUND
        reactor.advance(3.0)
        assert _status(client.pump(first)).code == pb.MESSAGE_NOT_FOUND
    finally:
        client.close()
        server.stop()


def test_without_a_long_polling_timeout_a_receive_waits_its_deadline_less_its_request_timeout(served) -> None:
    """The Go client sends no long_polling_timeout: its deadline is await + its settings' request timeout."""
    server, reactor, client = served
    settings = pb.Settings(client_type=pb.SIMPLE_CONSUMER, subscription=pb.Subscription(group=pb.Resource(name="G")))
    settings.request_timeout.FromSeconds(3)
    answer, requests = _telemetry(client, settings)
    request = _receive_request(wait_s=1.0)
    request.ClearField("long_polling_timeout")
    future = client.receive_start(request, timeout=8.0)  # the deadline: a 5 s await + 3 s
    _held(server, reactor)
    [held] = server.holds.held()
    assert held.deadline - held.started == pytest.approx(5.0, abs=0.3)
    reactor.advance(held.deadline - reactor.seconds())
    assert _status(client.pump(future)).code == pb.MESSAGE_NOT_FOUND
    requests.put(None)


def test_a_stopping_server_answers_its_waiting_receives(tmp_path: Path) -> None:
    server, reactor, client = make_grpc_server(tmp_path)
    server.topics.ensure(TOPIC, 2)
    future = client.receive_start(_receive_request(wait_s=20.0), timeout=30)
    _held(server, reactor)
    stopped = server.stop()
    responses = client.pump(future)
    assert _status(responses).code == pb.MESSAGE_NOT_FOUND
    deadline = time.monotonic() + 10
    while not stopped.called:
        assert time.monotonic() < deadline
        reactor.run_thread_calls(timeout=0.05)
        reactor.advance(0.1)
    client.close()
