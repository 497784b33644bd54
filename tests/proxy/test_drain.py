"""A proxy that is asked to stop (SIGTERM) drains (rmqproxy/runtime.py ``stop``): it stops
accepting and says so on /ready, lets answers already in flight reach their clients (up to
shutdownDrainTimeoutMillis), answers held pulls as it closes its clients, and waits for a
departed orderly consumer's queue locks to be released upstream. And it is ready only once it has read
the upstream cluster."""

from __future__ import annotations

import pytest
from twisted.internet import defer
from twisted.web.test.requesthelper import DummyRequest

from codec.codes import FLAG_RESPONSE, RequestCode, ResponseCode
from codec.command import RemotingCommand
from rmqproxy.observe.readiness import DRAINING, READY, STARTING, Probes, ReadyResource
from rmqproxy.proxy.nodes import Node
from rmqproxy.proxy.front import PRIME_RETRY_S
from rmqproxy.proxy.upstream import UpstreamError
from rmqproxy.runtime import CLOSE_WAIT_S, DRAIN_POLL_S

from .harness import ProxyClient, heartbeat, lock_queues, make_proxy, pull_fields
from .test_tls import logged

NODE = Node("broker-a", 0, "10.1.0.1:10911", 10911, "127.0.0.1:10911")


@pytest.fixture
def setup(tmp_path):
    proxy, reactor, _events = make_proxy(tmp_path, lock_release_on_disconnect="immediate",
                                         shutdown_drain_timeout_ms=3000)  # fmt: skip
    return proxy, reactor, ProxyClient(proxy, reactor, NODE)


def _fired(d: defer.Deferred) -> bool:
    fired = []
    d.addBoth(fired.append)
    return bool(fired)


def _in_flight(client: ProxyClient, opaque: int) -> None:
    client.conn.dataReceived(RemotingCommand(RequestCode.GET_MAX_OFFSET, opaque=opaque,
                                             ext_fields={"topic": "T", "queueId": "0"}).encode())  # fmt: skip


def test_answers_in_flight_reach_their_clients_before_the_connections_close(setup) -> None:
    proxy, reactor, client = setup
    _in_flight(client, 5)
    stopped = proxy.stop()
    assert proxy.runtime.readiness.state == DRAINING
    assert not _fired(stopped) and not client.transport.disconnecting  # waiting for the broker's answer
    reactor.advance(1.0)
    client.broker.conn.dataReceived(RemotingCommand(ResponseCode.SUCCESS, opaque=5, flag=FLAG_RESPONSE,
                                                    ext_fields={"offset": "7"}).encode())  # fmt: skip
    assert client.answer(5).ext_fields == {"offset": "7"}
    reactor.advance(DRAIN_POLL_S)
    assert client.transport.disconnecting  # closed once nothing is in flight
    client.close()  # the transport reports the close
    assert _fired(stopped)


def test_answers_that_do_not_come_within_the_drain_timeout_do_not_hold_the_stop(setup) -> None:
    proxy, reactor, client = setup
    _in_flight(client, 5)
    stopped = proxy.stop()
    reactor.advance(2.9)
    assert not client.transport.disconnecting
    reactor.advance(0.2)
    assert client.transport.disconnecting
    reactor.advance(CLOSE_WAIT_S)  # the client never reports the close: the stop ends anyway
    assert _fired(stopped)


def test_held_pulls_stay_held_while_the_drain_lasts_and_are_answered_with_the_close(setup) -> None:
    proxy, reactor, client = setup
    opaque = client.send(RequestCode.PULL_MESSAGE, **pull_fields())
    (pull,) = client.broker.requests(RequestCode.PULL_MESSAGE)
    client.broker.answer(pull, ResponseCode.PULL_NOT_FOUND, {"nextBeginOffset": "0", "minOffset": "0",
                                                               "maxOffset": "0", "suggestWhichBrokerId": "0"})  # fmt: skip
    assert client.answer(opaque) is None  # held by the proxy till its deadline
    _in_flight(client, 5)
    proxy.stop()
    reactor.advance(1.0)
    assert client.answer(opaque) is None and not client.transport.disconnecting  # a held pull does not hold the drain
    client.broker.conn.dataReceived(RemotingCommand(ResponseCode.SUCCESS, opaque=5, flag=FLAG_RESPONSE).encode())
    lines = logged(lambda: reactor.advance(DRAIN_POLL_S))
    assert client.answer(opaque).code == ResponseCode.PULL_NOT_FOUND
    assert client.transport.disconnecting  # in the same turn: no pull again on a connection that closes
    drained = [line for line in lines if line.startswith("stopping: drained")]  # the record a rolling restart checks
    assert drained == [f"stopping: drained in {1.0 + DRAIN_POLL_S:.2f} s; answering 1 held pulls, "
                       "closing 1 client connections"], lines  # fmt: skip


def test_a_pull_that_comes_once_held_pulls_are_ended_is_answered_at_once_not_held_upstream(setup) -> None:
    proxy, reactor, client = setup
    proxy.runtime.holds.shutdown()
    opaque = client.send(RequestCode.PULL_MESSAGE, **pull_fields(offset=3))
    assert client.broker.requests(RequestCode.PULL_MESSAGE) == []
    answer = client.answer(opaque)
    assert answer.code == ResponseCode.PULL_NOT_FOUND and answer.ext_fields["nextBeginOffset"] == "3"


def test_a_departed_orderly_consumer_s_locks_are_released_before_the_stop_ends(setup) -> None:
    proxy, reactor, client = setup
    heartbeat(client)
    lock_queues(client)
    stopped = proxy.stop()
    assert client.transport.disconnecting
    client.close()  # the transport reports the close: the client has departed
    (unlock,) = client.broker.requests(RequestCode.UNLOCK_BATCH_MQ)
    assert not _fired(stopped)
    client.broker.answer(unlock, ResponseCode.SUCCESS)
    assert _fired(stopped) and client.broker.transport.disconnecting


def _cluster_answer(request: RemotingCommand) -> RemotingCommand:
    body = (b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.1.0.1:10911"},"brokerName":"broker-a",'
            b'"cluster":"C"}},"clusterAddrTable":{"C":["broker-a"]}}')  # fmt: skip
    return request.response(ResponseCode.SUCCESS, body=body)


def test_the_proxy_is_ready_once_it_has_read_the_cluster_and_tries_again_until_it_has(setup, monkeypatch) -> None:
    proxy, reactor, _client = setup
    readiness = proxy.runtime.readiness
    asked = []

    def request(command: RemotingCommand) -> defer.Deferred:
        asked.append(command.code)
        if len(asked) < 3:
            return defer.fail(UpstreamError("connection refused"))
        return defer.succeed(_cluster_answer(command))

    monkeypatch.setattr(proxy.front.namesrvs, "request", request)
    primed = []
    monkeypatch.setattr(proxy.front.nodes, "prime", primed.append)  # no ports on the fake reactor
    proxy._prime()
    assert readiness.state == STARTING and "connection refused" in readiness.reason
    reactor.advance(PRIME_RETRY_S)
    assert readiness.state == STARTING and len(asked) == 2
    reactor.advance(PRIME_RETRY_S)
    assert readiness.state == READY and asked == [RequestCode.GET_BROKER_CLUSTER_INFO] * 3
    assert primed == [[("broker-a", 0, "10.1.0.1:10911")]]
    reactor.advance(10 * PRIME_RETRY_S)
    assert len(asked) == 3


def _get(resource, path: bytes) -> tuple[int, bytes]:
    request = DummyRequest([path.strip(b"/")])
    request.path = path
    body = resource.render(request)
    return request.responseCode or 200, body


def test_ready_answers_200_only_when_ready_and_every_other_path_is_still_metrics(setup) -> None:
    proxy, reactor, _client = setup
    readiness = proxy.runtime.readiness
    metrics_seen = []

    class Metrics:
        def render(self, request):
            metrics_seen.append(request.path)
            return b"metrics"

    probes = Probes(Metrics(), ReadyResource(readiness))  # type: ignore[arg-type]
    assert _get(probes, b"/ready") == (503, b"starting: starting up\n")
    readiness.set_ready()
    assert _get(probes, b"/ready/") == (200, b"ready\n")
    readiness.drain()
    code, body = _get(probes, b"/ready")
    assert code == 503 and body.startswith(b"draining: ")
    readiness.set_ready()  # never ready again once draining
    assert _get(probes, b"/ready")[0] == 503
    assert _get(probes, b"/metrics") == (200, b"metrics") and metrics_seen == [b"/metrics"]
