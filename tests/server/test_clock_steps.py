"""A wall-clock step (NTP, ``date -s``) under a running server, through the injected clocks: the
reactor's ``task.Clock`` is the monotonic clock, ``reactor.wall`` the wall clock a test steps.
Held pulls and queue locks wait on the monotonic clock, so a step either way moves neither; timer
and delay messages are due at wall-clock times, so they follow it (docs/operations.md, Clocks)."""

from __future__ import annotations

import time

import pytest
from twisted.internet import task

from codec.bodies import LockBatchRequestBody, LockBatchResponseBody, MessageQueue
from codec.codes import PullSysFlag
from codec.codes import RequestCode as C
from codec.codes import ResponseCode as R
from rmqproxy.core.clocks import monotonic_reactor

from .harness import Client, send_header

Q = [MessageQueue("T", "rmqproxy-a", i) for i in range(2)]


@pytest.fixture
def broker(servers):
    return servers(message_delay_level="1s 2s 30s")


@pytest.mark.parametrize("step", [-10.0, 10.0], ids=["back", "forward"])
def test_held_pulls_end_at_their_monotonic_deadlines_whichever_way_the_wall_clock_steps(broker, step: float) -> None:
    server, reactor = broker
    client = Client(server)
    client.heartbeat("cg", {"T": "*"})
    client.send_message("T")
    events: list = []
    server.pulls.listeners.append(events.append)
    first = client.pull_message("T", 1, sys_flag=PullSysFlag.SUSPEND, suspend_timeout_millis=15000)
    reactor.advance(5.0)
    reactor.wall.step(step)  # one pull held before the step, one after it
    second = client.pull_message("T", 1, sys_flag=PullSysFlag.SUSPEND, suspend_timeout_millis=15000)
    reactor.advance(5.0)
    reactor.wall.step(-2 * step)  # and the other way: no step may end a hold early or late
    assert server.holds.count == 2
    answered_ms = []
    for opaque, held in ((first, 1), (second, 0)):
        reactor.advance(5.0 - 2**-10)
        assert client.answer(opaque) is None and server.holds.count == held + 1  # one tick before 15 s: held
        reactor.advance(2**-10)
        assert client.answer(opaque).code == R.PULL_NOT_FOUND and server.holds.count == held
        answered_ms.append(int(reactor.wall() * 1000))
    # the event log's times are the (stepped) wall clock's, its durations the monotonic clock's
    assert [(event.ts_ms, event.total_ms) for event in events] == [(ms, 15000.0) for ms in answered_ms]
    assert [event.ts_ms - event.arrived_ms for event in events] == [15000, 15000]


@pytest.mark.parametrize("step", [-120.0, 120.0], ids=["back", "forward"])
def test_a_queue_lock_expires_60_s_after_its_renewal_whichever_way_the_wall_clock_steps(broker, step: float) -> None:
    server, reactor = broker
    a, b = Client(server, "a@1"), Client(server, "b@1")
    a.send_message("T")
    a.heartbeat("og", {"T": "*"})
    b.heartbeat("og", {"T": "*"})

    def lock(client: Client, client_id: str) -> list:
        answer = client.call(C.LOCK_BATCH_MQ, body=LockBatchRequestBody("og", client_id, False, Q).to_json())
        return LockBatchResponseBody.from_json(answer.body).lock_ok_mq_set

    assert set(lock(a, "a@1")) == set(Q)
    reactor.wall.step(step)
    assert lock(b, "b@1") == [] and server.locks.owner("og", Q[0]) == "a@1"  # a step expires nothing
    reactor.advance(60.0)
    assert lock(b, "b@1") == [] and server.locks.owner("og", Q[0]) == "a@1"  # 60 s exactly: still a's
    reactor.advance(2**-10)
    assert set(lock(b, "b@1")) == set(Q)  # nor does a step back keep it past 60 s


def _send(client: Client, topic: str, props: str) -> None:
    assert client.call(C.SEND_MESSAGE_V2, send_header(topic, 0, props), b"due").code == R.SUCCESS


@pytest.mark.parametrize(("topic", "props"), [("Timed", "TIMER_DELAY_SEC\x0130"), ("Delayed", "DELAY\x013")],
                         ids=["timer", "delay-level"])  # fmt: skip
def test_timer_and_delay_messages_follow_the_wall_clock(broker, topic: str, props: str) -> None:
    """Both are due 30 s after they were sent, on the wall clock: a step forward delivers them
    within a second (the reference's timer wheel ticks each second), a step back puts them off."""
    server, reactor = broker
    client = Client(server)
    _send(client, topic, props)
    reactor.advance(10.0)
    reactor.wall.step(25.0)  # the wall clock now reads 35 s past the send: due
    assert server.store.max_offset(topic, 0) == 0
    reactor.advance(1.0)
    assert server.store.max_offset(topic, 0) == 1
    _send(client, topic, props)  # due at wall time +30 s: reactor time +30 s
    reactor.wall.step(-10.0)  # now at reactor time +40 s
    reactor.advance(39.0)
    assert server.store.max_offset(topic, 0) == 1
    reactor.advance(1.0)
    assert server.store.max_offset(topic, 0) == 2


def test_the_reactor_s_clock_is_made_monotonic_only_before_anything_is_scheduled() -> None:
    fresh, busy = task.Clock(), task.Clock()
    monotonic_reactor(fresh)
    assert fresh.seconds is time.monotonic
    busy.callLater(1.0, lambda: None)
    with pytest.raises(RuntimeError):
        monotonic_reactor(busy)
