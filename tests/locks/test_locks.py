"""LockManager on task.Clock: grant, renew, expiry, unlock by non-owner, unregister, both
disconnect modes (nothing freed one tick early, freed exactly on time), handoff notice."""

from __future__ import annotations

import pytest
from twisted.internet import task

from codec.bodies import LockBatchRequestBody, LockBatchResponseBody, MessageQueue, UnlockBatchRequestBody
from codec.codes import RequestCode as C
from rmqproxy.broker.locktable import LockManager

from ..server.harness import Client

Q = [MessageQueue("T", "rmqproxy-a", i) for i in range(4)]


def manager(mode: str = "safe") -> tuple[LockManager, task.Clock, list[str]]:
    clock = task.Clock()
    freed: list[str] = []
    return LockManager(clock, release_on_disconnect=mode, on_free=freed.append), clock, freed


def test_free_queues_are_granted_and_renewed_by_their_owner_only() -> None:
    locks, clock, _ = manager()
    assert locks.lock("g", "a", Q[:2]) == Q[:2]
    clock.advance(30)
    assert locks.lock("g", "b", Q[:3]) == [Q[2]]
    assert locks.lock("g", "a", Q[:2]) == Q[:2]  # renews
    assert locks.owner("g", Q[0]) == "a" and locks.owner("g", Q[2]) == "b"
    assert locks.lock("other-group", "b", Q[:1]) == Q[:1]  # groups are separate


def test_a_lock_expires_60_seconds_after_its_last_renewal() -> None:
    locks, clock, _ = manager()
    locks.lock("g", "a", Q[:1])
    clock.advance(60)
    assert locks.lock("g", "b", Q[:1]) == []  # not yet: expiry is strictly after 60 s
    clock.advance(2**-10)
    assert locks.lock("g", "b", Q[:1]) == Q[:1]


def test_unlock_releases_only_the_callers_locks() -> None:
    locks, clock, freed = manager()
    locks.lock("g", "a", Q[:2])
    locks.unlock("g", "b", Q[:2])
    assert locks.owner("g", Q[0]) == "a"
    locks.unlock("g", "a", Q[:1])
    assert locks.owner("g", Q[0]) is None and locks.owner("g", Q[1]) == "a"


def test_unregister_releases_at_once() -> None:
    locks, clock, _ = manager()
    locks.lock("g", "a", Q, conn="c1")
    locks.client_unregistered("a", "g")
    assert locks.locked_queues("g") == 0


def test_safe_mode_frees_exactly_at_last_renewal_plus_31_s() -> None:
    locks, clock, freed = manager("safe")
    locks.lock("g", "a", Q, conn="c1")
    clock.advance(10)
    locks.lock("g", "a", Q, conn="c1")  # last renewal at t=10
    clock.advance(5)
    locks.connection_closed("c1")  # t=15
    assert locks.lock("g", "b", Q) == []  # refused: b now wants them
    tick = 2**-10  # exact in binary floating point, so "one tick early" is exact too
    clock.advance(10 + 31 - 15 - tick)  # one tick before 10 + 31
    assert locks.owner("g", Q[0]) == "a" and freed == []
    clock.advance(tick)  # t=41
    assert locks.owner("g", Q[0]) is None and freed == ["g"]
    assert locks.lock("g", "b", Q) == Q
    assert [round(d, 3) for _, d in locks.stats.handoffs] == [0.0] * 4


def test_safe_mode_keeps_locks_of_a_client_that_comes_back() -> None:
    locks, clock, freed = manager("safe")
    locks.lock("g", "a", Q, conn="c1")
    locks.connection_closed("c1")
    clock.advance(5)
    locks.lock("g", "a", Q, conn="c2")  # reconnected and renewed
    clock.advance(60)
    assert freed == [] and not clock.getDelayedCalls()


def test_closing_one_of_two_connections_releases_nothing() -> None:
    locks, clock, freed = manager("immediate")
    locks.lock("g", "a", Q, conn="c1")
    locks.lock("g", "a", Q, conn="c2")
    locks.connection_closed("c1")
    assert locks.locked_queues("g") == 4
    locks.connection_closed("c2")
    assert locks.locked_queues("g") == 0


def test_immediate_mode_frees_when_the_last_connection_closes_and_notifies_waiters() -> None:
    locks, clock, freed = manager("immediate")
    locks.lock("g", "a", Q, conn="c1")
    assert locks.lock("g", "b", Q[:1]) == []
    clock.advance(2)
    locks.connection_closed("c1")
    assert freed == ["g"] and locks.locked_queues("g") == 0
    clock.advance(0.25)
    assert locks.lock("g", "b", Q[:1]) == Q[:1]
    assert list(locks.stats.handoffs) == [("g", pytest.approx(0.25))]


def test_freeing_queues_nobody_waits_for_does_not_notify() -> None:
    locks, clock, freed = manager("immediate")
    locks.lock("g", "a", Q, conn="c1")
    locks.connection_closed("c1")
    assert freed == []


def test_lock_requests_are_counted_by_outcome() -> None:
    locks, clock, _ = manager()
    locks.lock("g", "a", Q[:2])
    locks.lock("g", "b", Q[:3])
    locks.lock("g", "b", Q[:1])
    assert locks.stats.requests == {("g", "lock", "granted"): 1, ("g", "lock", "partial"): 1,
                                    ("g", "lock", "refused"): 1}  # fmt: skip


def test_lock_and_unlock_over_the_wire_and_the_handoff_notice(servers, tmp_path) -> None:
    server, reactor = servers(tmp_path, lock_release_on_disconnect="immediate")
    a, b = Client(server, "a@1"), Client(server, "b@1")
    a.send_message("T")  # creates T with 4 queues: only real queues are locked
    a.heartbeat("og", {"T": "*"})
    b.heartbeat("og", {"T": "*"})
    request = LockBatchRequestBody("og", "a@1", None, Q[:2])
    held = LockBatchResponseBody.from_json(a.call(C.LOCK_BATCH_MQ, body=request.to_json()).body)
    assert set(held.lock_ok_mq_set) == set(Q[:2])
    refused = b.call(C.LOCK_BATCH_MQ, body=LockBatchRequestBody("og", "b@1", False, Q[:2]).to_json())
    assert LockBatchResponseBody.from_json(refused.body).lock_ok_mq_set == []
    b.read()
    assert a.call(C.UNLOCK_BATCH_MQ, body=UnlockBatchRequestBody("og", "a@1", None, Q[:1]).to_json()).code == 0
    assert any(c.code == C.NOTIFY_CONSUMER_IDS_CHANGED for c in b.read())  # b may lock now
    granted = b.call(C.LOCK_BATCH_MQ, body=LockBatchRequestBody("og", "b@1", False, Q[:2]).to_json())
    assert LockBatchResponseBody.from_json(granted.body).lock_ok_mq_set == [Q[0]]
    a.call(C.UNREGISTER_CLIENT, client_id="a@1", consumer_group="og")
    assert server.locks.owner("og", Q[1]) is None
