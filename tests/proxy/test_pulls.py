"""Pulls through the proxy (rmqproxy/proxy/pull_relay.py) on a fake clock: the client's deadline is
kept exactly whatever the broker does, a late answer is neither lost nor given twice, and a
client cannot make the proxy pile up upstream pulls."""

from __future__ import annotations

import pytest

from codec.codes import RequestCode, ResponseCode
from rmqproxy.proxy.nodes import Node

from .harness import ProxyClient, make_proxy, pull_fields

PULL = RequestCode.PULL_MESSAGE
FOUND_EXT = {"suggestWhichBrokerId": "0", "nextBeginOffset": "1", "minOffset": "0", "maxOffset": "1"}
BODY = b"not parsed by the proxy"


@pytest.fixture
def setup(tmp_path):
    proxy, reactor, events = make_proxy(tmp_path)
    node = Node("broker-a", 0, "10.1.0.1:10911", 10911, "127.0.0.1:10911")
    client = ProxyClient(proxy, reactor, node)
    return proxy, reactor, events, client


def test_a_held_pull_gets_not_found_at_its_own_deadline_while_the_broker_still_holds_it(setup) -> None:
    proxy, reactor, events, client = setup
    opaque = client.send(PULL, **pull_fields(suspend_ms=15000))
    assert len(client.broker.requests(PULL)) == 1
    reactor.advance(14.999)
    assert client.answer(opaque) is None
    reactor.advance(0.001)
    answer = client.answer(opaque)
    assert answer is not None and answer.code == ResponseCode.PULL_NOT_FOUND
    assert answer.ext_fields["nextBeginOffset"] == "0"
    (event,) = events
    assert (event.held, event.wake, event.hold_ms, event.code) == (True, "timeout", 15000.0, "PULL_NOT_FOUND")


def test_the_retry_waits_on_the_pull_the_broker_still_holds_and_gets_its_answer(setup) -> None:
    proxy, reactor, events, client = setup
    client.send(PULL, **pull_fields())
    reactor.advance(15)
    retry = client.send(PULL, **pull_fields())
    (upstream,) = client.broker.requests(PULL)  # not sent again
    reactor.advance(3)  # the broker's 5 s tick ends its hold late, with a message that came meanwhile
    client.broker.answer(upstream, ResponseCode.SUCCESS, FOUND_EXT, BODY)
    answer = client.answer(retry)
    assert (answer.code, answer.body, answer.opaque) == (ResponseCode.SUCCESS, BODY, retry)
    assert events[-1].wake == "upstream" and events[-1].held


def test_a_late_answer_serves_the_next_pull_of_that_offset_once(setup) -> None:
    proxy, reactor, events, client = setup
    client.send(PULL, **pull_fields())
    reactor.advance(15)
    (upstream,) = client.broker.requests(PULL)
    client.broker.answer(upstream, ResponseCode.SUCCESS, FOUND_EXT, BODY)  # before the client's retry
    assert proxy.stash.used == len(BODY)
    retry = client.send(PULL, **pull_fields())
    answer = client.answer(retry)
    assert (answer.code, answer.body) == (ResponseCode.SUCCESS, BODY)
    assert proxy.stash.used == 0
    assert len(client.broker.requests(PULL)) == 1
    again = client.send(PULL, **pull_fields())  # the same offset again: the broker is asked
    assert client.answer(again) is None and len(client.broker.requests(PULL)) == 2


def test_a_late_answer_is_not_given_to_a_pull_of_another_offset(setup) -> None:
    proxy, reactor, events, client = setup
    client.send(PULL, **pull_fields(offset=0))
    reactor.advance(15)
    (upstream,) = client.broker.requests(PULL)
    client.broker.answer(upstream, ResponseCode.SUCCESS, FOUND_EXT, BODY)
    other = client.send(PULL, **pull_fields(offset=7))
    assert client.answer(other) is None
    assert [int(r.ext_fields["queueOffset"]) for r in client.broker.requests(PULL)] == [0, 7]
    assert proxy.stash.used == 0


def test_a_pull_for_another_offset_retires_the_held_one_whose_answer_then_goes_nowhere(setup) -> None:
    proxy, reactor, events, client = setup
    first = client.send(PULL, **pull_fields(offset=0))
    reactor.advance(15)
    assert client.answer(first).code == ResponseCode.PULL_NOT_FOUND
    second = client.send(PULL, **pull_fields(offset=5))
    old, new = client.broker.requests(PULL)
    client.broker.answer(old, ResponseCode.SUCCESS, FOUND_EXT, BODY)
    assert client.answer(second) is None and proxy.stash.used == 0
    client.broker.answer(new, ResponseCode.SUCCESS, {**FOUND_EXT, "nextBeginOffset": "6"}, b"x")
    assert client.answer(second).body == b"x"


def test_an_early_upstream_not_found_is_asked_again_no_more_than_ten_times_a_second(setup) -> None:
    proxy, reactor, events, client = setup
    opaque = client.send(PULL, **pull_fields(suspend_ms=15000))
    (first,) = client.broker.requests(PULL)
    client.broker.answer(first, ResponseCode.PULL_NOT_FOUND, {**FOUND_EXT, "nextBeginOffset": "0"})
    assert client.answer(opaque) is None and len(client.broker.requests(PULL)) == 1
    reactor.advance(0.1)
    assert len(client.broker.requests(PULL)) == 2
    reactor.advance(14.9)
    assert client.answer(opaque).code == ResponseCode.PULL_NOT_FOUND


def test_a_pull_that_is_not_suspended_is_relayed_as_is(setup) -> None:
    proxy, reactor, events, client = setup
    opaque = client.send(PULL, **pull_fields(suspend_ms=0))
    (upstream,) = client.broker.requests(PULL)
    client.broker.answer(upstream, ResponseCode.PULL_NOT_FOUND, FOUND_EXT)
    answer = client.answer(opaque)
    assert answer.code == ResponseCode.PULL_NOT_FOUND and answer.ext_fields == FOUND_EXT
    assert not events[-1].held and events[-1].wake == "none"


def test_one_connection_cannot_pile_up_upstream_pulls(tmp_path) -> None:
    proxy, reactor, events = make_proxy(tmp_path, max_held_pulls_per_connection=3)
    client = ProxyClient(proxy, reactor, Node("broker-a", 0, "10.1.0.1:10911", 10911, "127.0.0.1:10911"))
    opaques = [client.send(PULL, **pull_fields(offset=i % 2)) for i in range(6)]
    assert len(client.broker.requests(PULL)) == 3
    busy = [client.answer(o) for o in opaques[3:]]
    assert all(a is not None and a.code == ResponseCode.SYSTEM_BUSY for a in busy)


def test_a_broker_that_does_not_answer_a_pull_in_time_gives_an_error_not_silence(setup) -> None:
    proxy, reactor, events, client = setup
    opaque = client.send(PULL, **pull_fields(suspend_ms=0))
    reactor.advance(proxy.timeout_s)
    answer = client.answer(opaque)
    assert answer.code == ResponseCode.SYSTEM_ERROR and "broker-a" in answer.remark


def test_a_disconnect_ends_held_pulls_and_forgets_late_answers(setup) -> None:
    proxy, reactor, events, client = setup
    client.send(PULL, **pull_fields())
    reactor.advance(15)
    (upstream,) = client.broker.requests(PULL)
    client.broker.answer(upstream, ResponseCode.SUCCESS, FOUND_EXT, BODY)
    client.send(PULL, **pull_fields(offset=1))
    client.close()
    assert proxy.stash.used == 0 and proxy.holds.count == 0
    assert events[-1].wake == "disconnect" and events[-1].code == "NO_RESPONSE"


def test_an_upstream_not_found_close_to_the_deadline_is_not_asked_again(setup) -> None:
    """A broker ends the pulls it held on its own tick, all at once: with under a second left the
    client waits for its deadline instead of the proxy sending every pull again just then."""
    proxy, reactor, events, client = setup
    opaque = client.send(PULL, **pull_fields(suspend_ms=5000))
    reactor.advance(4.5)
    (first,) = client.broker.requests(PULL)
    client.broker.answer(first, ResponseCode.PULL_NOT_FOUND, {**FOUND_EXT, "nextBeginOffset": "0"})
    reactor.advance(0.499)
    assert client.answer(opaque) is None and len(client.broker.requests(PULL)) == 1
    reactor.advance(0.001)
    assert client.answer(opaque).code == ResponseCode.PULL_NOT_FOUND and events[-1].hold_ms == 5000.0
    retry = client.send(PULL, **pull_fields(suspend_ms=5000))
    assert client.answer(retry) is None and len(client.broker.requests(PULL)) == 2  # a fresh one for the retry


def test_at_max_held_pulls_the_hog_gives_way_busy_and_its_late_answer_is_kept(tmp_path) -> None:
    """Issue 40 through the proxy: another connection's pull is held at ``maxHeldPulls``; the hog's
    newest is answered SYSTEM_BUSY saying why, and what its broker pull brings later is not lost."""
    proxy, reactor, events = make_proxy(tmp_path, max_held_pulls=2)
    node = Node("broker-a", 0, "10.1.0.1:10911", 10911, "127.0.0.1:10911")
    hog, other = ProxyClient(proxy, reactor, node, "hog@1"), ProxyClient(proxy, reactor, node, "other@1")
    held = [hog.send(PULL, **pull_fields(queue_id=q)) for q in (0, 1)]
    opaque = other.send(PULL, **pull_fields(suspend_ms=2000))
    assert other.answer(opaque) is None and proxy.holds.count == 2
    busy = hog.answer(held[1])
    assert busy.code == ResponseCode.SYSTEM_BUSY and "fair share of 1" in busy.remark
    assert hog.answer(held[0]) is None
    assert (events[-1].code, events[-1].wake, events[-1].held) == ("SYSTEM_BUSY", "evicted", True)
    assert proxy.runtime.rejections.counts == {"over_fair_share": 1}
    upstream = [r for r in hog.broker.requests(PULL) if r.ext_fields["queueId"] == "1"][0]
    hog.broker.answer(upstream, ResponseCode.SUCCESS, FOUND_EXT, BODY)  # after its client was answered busy
    again = hog.send(PULL, **pull_fields(queue_id=1))
    assert hog.answer(again).body == BODY
    reactor.advance(2.0)
    assert other.answer(opaque).code == ResponseCode.PULL_NOT_FOUND
