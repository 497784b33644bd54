"""Frames the proxy does not interpret pass through as bytes (rmqproxy/proxy/session.py): the
broker reads exactly what the client wrote and the client exactly what the broker answered, under
the client's own opaque; the proxy's own requests on the same upstream connection never share an
opaque with a client's; and what is not a valid frame never goes upstream."""

from __future__ import annotations

import struct

import pytest

from codec.codes import FLAG_ONEWAY, FLAG_RESPONSE, RequestCode, ResponseCode, SerializeType
from codec.command import RemotingCommand
from rmqproxy.net.rejects import BAD_FRAME
from rmqproxy.proxy.nodes import Node
from rmqproxy.proxy.upstream import PROXY_FIRST_OPAQUE

from .harness import ProxyClient, make_proxy, pull_fields

NODE = Node("broker-a", 0, "10.1.0.1:10911", 10911, "127.0.0.1:10911")
SIGNED = {"AccessKey": "rocketmq2", "Signature": "abc=", "topic": "T", "queueId": "3"}


@pytest.fixture
def setup(tmp_path):
    proxy, reactor, _events = make_proxy(tmp_path)
    return proxy, reactor, ProxyClient(proxy, reactor, NODE)


def _frame(command: RemotingCommand) -> bytes:
    return command.encode()


@pytest.mark.parametrize("serialize", [SerializeType.JSON, SerializeType.ROCKETMQ])
def test_a_request_and_its_answer_cross_the_proxy_byte_for_byte(setup, serialize) -> None:
    proxy, reactor, client = setup
    request = _frame(RemotingCommand(RequestCode.GET_MAX_OFFSET, opaque=77, ext_fields=SIGNED, body=b"\x00\xffbody",
                                     version=453, serialize_type=serialize))  # fmt: skip
    client.conn.dataReceived(request)
    assert client.broker.transport.value() == request  # the client's opaque, and every other byte
    answer = _frame(RemotingCommand(ResponseCode.SUCCESS, opaque=77, flag=FLAG_RESPONSE, ext_fields={"offset": "9"},
                                    remark="ok", version=453, serialize_type=serialize))  # fmt: skip
    client.broker.conn.dataReceived(answer)
    assert client.transport.value() == answer
    assert client.conn.in_flight == 0


def test_a_oneway_request_passes_as_it_came_and_awaits_nothing(setup) -> None:
    proxy, reactor, client = setup
    oneway = _frame(RemotingCommand(RequestCode.UPDATE_CONSUMER_OFFSET, opaque=5, flag=FLAG_ONEWAY,
                                    ext_fields={"consumerGroup": "G", "topic": "T", "queueId": "0", "commitOffset": "5"}))  # fmt: skip
    client.conn.dataReceived(oneway)
    assert client.broker.transport.value() == oneway
    assert client.conn.in_flight == 0 and not client.broker.conn.peer.has_outstanding()


def test_the_proxy_s_own_requests_are_numbered_apart_and_a_colliding_client_request_is_renumbered(setup) -> None:
    proxy, reactor, client = setup
    client.send(RequestCode.PULL_MESSAGE, **pull_fields(suspend_ms=0))  # the proxy's own pull upstream
    (pull,) = client.broker.requests(RequestCode.PULL_MESSAGE)
    assert pull.opaque == PROXY_FIRST_OPAQUE
    clash = RemotingCommand(RequestCode.GET_MAX_OFFSET, opaque=PROXY_FIRST_OPAQUE, ext_fields=SIGNED)
    client.conn.dataReceived(clash.encode())
    (forwarded,) = client.broker.requests(RequestCode.GET_MAX_OFFSET)
    assert forwarded.opaque not in (PROXY_FIRST_OPAQUE, pull.opaque) and forwarded.ext_fields == SIGNED
    client.broker.answer(forwarded, ResponseCode.SUCCESS, {"offset": "4"})
    client.broker.answer(pull, ResponseCode.PULL_NOT_FOUND, {"nextBeginOffset": "0", "minOffset": "0",
                                                               "maxOffset": "0", "suggestWhichBrokerId": "0"})  # fmt: skip
    answers = [c for c in client.read() if c.is_response]
    assert sorted((a.opaque, a.code) for a in answers) == sorted(
        [(PROXY_FIRST_OPAQUE, ResponseCode.SUCCESS), (1, ResponseCode.PULL_NOT_FOUND)])  # fmt: skip
    assert client.conn.in_flight == 0


def test_the_proxy_s_numbering_skips_an_opaque_a_client_request_holds(setup) -> None:
    proxy, reactor, client = setup
    client.conn.dataReceived(RemotingCommand(RequestCode.GET_MAX_OFFSET, opaque=PROXY_FIRST_OPAQUE,
                                             ext_fields=SIGNED).encode())  # fmt: skip
    client.send(RequestCode.PULL_MESSAGE, **pull_fields())
    (pull,) = client.broker.requests(RequestCode.PULL_MESSAGE)
    assert pull.opaque == PROXY_FIRST_OPAQUE + 1


def test_an_answer_to_a_request_no_longer_awaited_goes_nowhere(setup) -> None:
    proxy, reactor, client = setup
    client.conn.dataReceived(RemotingCommand(RequestCode.GET_MAX_OFFSET, opaque=8, ext_fields=SIGNED).encode())
    reactor.advance(proxy.timeout_s + 1.0)
    (late_error,) = client.read()
    assert late_error.code == ResponseCode.SYSTEM_ERROR and late_error.opaque == 8
    client.broker.conn.dataReceived(RemotingCommand(ResponseCode.SUCCESS, opaque=8, flag=FLAG_RESPONSE).encode())
    assert client.read() == [] and client.conn.in_flight == 0


def test_requests_in_flight_when_the_broker_connection_closes_get_an_error_each(setup) -> None:
    proxy, reactor, client = setup
    for opaque in (1, 2, 3):
        client.conn.dataReceived(RemotingCommand(RequestCode.GET_MAX_OFFSET, opaque=opaque, ext_fields=SIGNED,
                                                 serialize_type=SerializeType.ROCKETMQ).encode())  # fmt: skip
    client.broker.conn.connectionLost(None)
    answers = client.read()
    assert sorted(a.opaque for a in answers) == [1, 2, 3]
    assert {(a.code, a.serialize_type) for a in answers} == {(ResponseCode.SYSTEM_ERROR, SerializeType.ROCKETMQ)}
    assert all("did not answer" in a.remark for a in answers) and client.conn.in_flight == 0


@pytest.mark.parametrize("header", [b'{"code":30,"opaque":1', b'{"code":"x","opaque":1}', b"[1,2]",
                                    b'{"code":30,"extFields":{"a":{"b":1}}}'])  # fmt: skip
def test_a_frame_the_broker_would_choke_on_never_goes_upstream(setup, header) -> None:
    proxy, reactor, client = setup
    payload = struct.pack(">i", len(header)) + header
    client.conn.dataReceived(struct.pack(">i", len(payload)) + payload)
    assert client.broker.transport.value() == b""
    assert client.transport.disconnecting or client.transport.disconnected
    assert proxy.runtime.rejections.counts.get(BAD_FRAME, 0) == 1


def test_the_broker_s_answer_to_a_client_that_is_not_reading_is_bounded(setup) -> None:
    proxy, reactor, client = setup
    client.conn.pauseProducing()
    client.conn.buffers.per_connection = 1000
    for opaque in (1, 2):
        client.conn.dataReceived(RemotingCommand(RequestCode.GET_MAX_OFFSET, opaque=opaque, ext_fields=SIGNED).encode())
    # the client's frames wait (it is paused), so let them through, then stop it reading again
    client.conn.resumeProducing()
    client.conn.pauseProducing()
    client.transport.clear()
    for opaque in (1, 2):
        client.broker.conn.dataReceived(RemotingCommand(ResponseCode.SUCCESS, opaque=opaque, flag=FLAG_RESPONSE,
                                                        body=b"x" * 600).encode())  # fmt: skip
    first, second = client.read()
    assert (first.code, len(first.body)) == (ResponseCode.SUCCESS, 600)
    assert second.code == ResponseCode.SYSTEM_BUSY and second.body == b""


def test_a_broker_that_does_not_read_what_is_forwarded_stops_the_proxy_reading_its_client(setup) -> None:
    proxy, reactor, client = setup
    client.broker.conn.pauseProducing()  # the upstream socket's buffer is full
    assert client.transport.producerState == "paused"
    client.conn.pauseProducing()
    client.conn.resumeProducing()  # the client read its answers: still not read, for the broker's sake
    assert client.transport.producerState == "paused"
    client.broker.conn.resumeProducing()
    assert client.transport.producerState == "producing"


def test_a_client_held_back_for_its_broker_is_read_again_when_that_connection_goes(setup) -> None:
    proxy, reactor, client = setup
    client.broker.conn.pauseProducing()
    client.broker.conn.connectionLost(None)
    assert client.transport.producerState == "producing"
