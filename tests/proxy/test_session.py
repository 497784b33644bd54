"""A client connection through the proxy (rmqproxy/proxy/session.py, handoff.py) on a fake clock:
what the client signs reaches the broker unchanged, requests the broker starts reach the client
and its answers come back, and an orderly consumer's locks are released when it is gone."""

from __future__ import annotations

import pytest

from codec.codes import FLAG_ONEWAY, RequestCode, ResponseCode, SerializeType
from codec.command import RemotingCommand
from rmqproxy.proxy.handoff import LINGER_S
from rmqproxy.proxy.nodes import Node

from .harness import ProxyClient, heartbeat, lock_queues, make_proxy

NODE = Node("broker-a", 0, "10.1.0.1:10911", 10911, "127.0.0.1:10911")


@pytest.fixture
def setup(tmp_path):
    proxy, reactor, events = make_proxy(tmp_path, lock_release_on_disconnect="immediate")
    return proxy, reactor, ProxyClient(proxy, reactor, NODE)


def test_a_signed_request_reaches_the_broker_with_its_ext_fields_and_body_unchanged(setup) -> None:
    proxy, reactor, client = setup
    ext = {"AccessKey": "rocketmq2", "Signature": "abc=", "topic": "T", "bname": "broker-a", "x": "1"}
    body = b"\x00\x01binary body\xff"
    for serialize in (SerializeType.JSON, SerializeType.ROCKETMQ):
        command = RemotingCommand(code=RequestCode.GET_MAX_OFFSET, ext_fields=ext, body=body, version=409,
                                  serialize_type=serialize)  # fmt: skip
        opaque, data = client.peer.request(command)
        client.conn.dataReceived(data)
        (forwarded,) = [c for c in client.broker.requests(RequestCode.GET_MAX_OFFSET) if c.serialize_type == serialize]
        assert (forwarded.ext_fields, forwarded.body, forwarded.version) == (ext, body, 409)
        client.broker.answer(forwarded, ResponseCode.SUCCESS, {"offset": "42"})
        answer = client.answer(opaque)
        assert (answer.code, answer.ext_fields, answer.serialize_type) == (ResponseCode.SUCCESS, {"offset": "42"}, serialize)


def test_a_code_the_proxy_does_not_know_is_forwarded_and_answered_by_the_broker(setup) -> None:
    proxy, reactor, client = setup
    opaque = client.send(987, ext={"k": "v"})
    (forwarded,) = client.broker.requests(987)
    client.broker.answer(forwarded, ResponseCode.SUCCESS, body=b"ok")
    assert client.answer(opaque).body == b"ok"


def test_a_oneway_request_is_forwarded_oneway(setup) -> None:
    proxy, reactor, client = setup
    client.send(RequestCode.UPDATE_CONSUMER_OFFSET, flag=FLAG_ONEWAY,
                ext={"consumerGroup": "G", "topic": "T", "queueId": "0", "commitOffset": "5"})  # fmt: skip
    (forwarded,) = client.broker.requests(RequestCode.UPDATE_CONSUMER_OFFSET)
    assert forwarded.is_oneway and forwarded.ext_fields["commitOffset"] == "5"


def test_requests_the_broker_starts_reach_the_client_and_its_answer_goes_back(setup) -> None:
    proxy, reactor, client = setup
    client.broker.start(RemotingCommand(code=RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, flag=FLAG_ONEWAY,
                                        ext_fields={"consumerGroup": "G"}))  # fmt: skip
    (notify,) = [c for c in client.read() if c.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED]
    assert notify.is_oneway and notify.ext_fields == {"consumerGroup": "G"}
    broker_opaque = client.broker.start(RemotingCommand(code=RequestCode.GET_CONSUMER_RUNNING_INFO,
                                                        ext_fields={"consumerGroup": "G", "clientId": "c"}))  # fmt: skip
    (ask,) = [c for c in client.read() if c.code == RequestCode.GET_CONSUMER_RUNNING_INFO]
    client.conn.dataReceived(ask.response(ResponseCode.SUCCESS, body=b"{running}").encode())
    (answer,) = [c for c in client.broker.read() if c.is_response]
    assert (answer.opaque, answer.body) == (broker_opaque, b"{running}")


def test_a_client_that_does_not_answer_the_broker_gets_it_a_system_error(setup) -> None:
    proxy, reactor, client = setup
    client.broker.start(RemotingCommand(code=RequestCode.CONSUME_MESSAGE_DIRECTLY, ext_fields={"msgId": "m"}))
    reactor.advance(10)
    (answer,) = [c for c in client.broker.read() if c.is_response]
    assert answer.code == ResponseCode.SYSTEM_ERROR and "client did not answer" in answer.remark


def test_an_unreachable_broker_answers_every_request_with_a_remark(tmp_path) -> None:
    proxy, reactor, events = make_proxy(tmp_path)
    client = ProxyClient(proxy, reactor, NODE)
    client.session.link.conn.connectionLost(None)  # the broker is gone; a new dial fails
    client.session.link.closed = True
    answer = client.call(RequestCode.GET_MAX_OFFSET, ext={"topic": "T", "queueId": "0"})
    assert answer.code == ResponseCode.SYSTEM_ERROR and "broker-a (10.1.0.1:10911)" in answer.remark


def test_a_departed_client_s_locks_are_released_in_its_name_before_its_channel_closes(setup) -> None:
    proxy, reactor, client = setup
    heartbeat(client)
    lock = lock_queues(client)
    client.close()
    (unlock,) = client.broker.requests(RequestCode.UNLOCK_BATCH_MQ)
    assert (unlock.ext_fields, unlock.body) == (lock.ext_fields, lock.body)  # signed as the lock was
    assert client.broker.conn.connected  # the group is told only once the queues are free
    client.broker.answer(unlock, ResponseCode.SUCCESS)
    assert client.broker.transport.disconnecting


def test_a_client_still_connected_elsewhere_keeps_its_locks(tmp_path) -> None:
    proxy, reactor, events = make_proxy(tmp_path, lock_release_on_disconnect="immediate")
    first = ProxyClient(proxy, reactor, NODE)
    other = ProxyClient(proxy, reactor, Node("broker-b", 0, "10.1.0.2:10911", 10921, "127.0.0.1:10921"))
    for client in (first, other):
        heartbeat(client)
    lock_queues(first)
    first.close()
    assert first.broker.requests(RequestCode.UNLOCK_BATCH_MQ) == []
    assert not first.broker.transport.disconnecting
    reactor.advance(LINGER_S)
    assert first.broker.transport.disconnecting
    assert first.broker.requests(RequestCode.UNLOCK_BATCH_MQ) == []


def test_safe_mode_releases_nothing(tmp_path) -> None:
    proxy, reactor, events = make_proxy(tmp_path, lock_release_on_disconnect="safe")
    client = ProxyClient(proxy, reactor, NODE)
    heartbeat(client)
    lock_queues(client)
    client.close()
    assert client.broker.requests(RequestCode.UNLOCK_BATCH_MQ) == []
    assert client.broker.transport.disconnecting


def test_a_new_upstream_connection_replays_the_client_s_heartbeat_first(setup) -> None:
    proxy, reactor, client = setup
    heartbeat(client)
    link = client.session.link
    replayed = []
    link.conn.connectionLost(None)

    def dial_again():  # what LazyConnection does on a successful dial, with a new fake broker end
        from .harness import FakeBroker

        broker = FakeBroker(client.session, reactor, dialed=False)
        link.conn = None
        ready = link._connected(broker.conn)
        replayed.append(broker)
        return ready

    dial_again()
    (broker,) = replayed
    (replay,) = broker.requests(RequestCode.HEART_BEAT)
    assert replay.body == client.broker.requests(RequestCode.HEART_BEAT)[0].body


def test_a_broker_that_does_not_answer_gets_the_client_an_error_within_a_second_of_the_timeout(setup) -> None:
    proxy, reactor, client = setup
    opaque = client.send(RequestCode.GET_MAX_OFFSET, ext={"topic": "T", "queueId": "0"})
    reactor.advance(proxy.timeout_s - 0.5)
    assert client.answer(opaque) is None
    assert client.conn.in_flight == 1
    reactor.advance(1.5)
    answer = client.answer(opaque)
    assert answer.code == ResponseCode.SYSTEM_ERROR and "did not answer" in answer.remark
    assert client.conn.in_flight == 0


def test_every_lock_request_not_covered_by_a_later_one_is_released(setup) -> None:
    """A client locks all its queues in one batch and then each new queue on its own: all of them
    are unlocked when it leaves; a batch that a later one covers is not sent twice."""
    proxy, reactor, client = setup
    heartbeat(client)
    first = lock_queues(client, queues=(0,))
    lock_queues(client, queues=(0, 1))  # covers the first
    third = lock_queues(client, queues=(2,))
    second = client.broker.requests(RequestCode.LOCK_BATCH_MQ)[1]
    client.close()
    unlocks = client.broker.requests(RequestCode.UNLOCK_BATCH_MQ)
    assert [u.body for u in unlocks] == [second.body, third.body]
    assert first.body not in [u.body for u in unlocks]
