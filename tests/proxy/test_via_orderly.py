"""Orderly consumers through ``rmqproxy proxy`` (``lockReleaseOnDisconnect=immediate``) in front of
a real Apache 4.9.7 cluster of two brokers, with the real Java clients of both lines: issue 8's
scenarios of tests/interop/test_orderly.py (tests/interop/orderly.py), run through the proxy.

The topic has 4 queues on each of broker-a and broker-b (created on both before any consumer
starts: the producer's READY waits for 8 queues on 2 brokers in the route). Queue ids repeat per
broker, so every check tells queues apart as (broker name, queue id), and the producer's selector
puts order id o on the (o % 8)-th queue sorted that way. The consumers allocate by circle
(AllocateMessageQueueAveragelyByCircle), so each consumer's locks span both brokers and a departed
consumer's locks must be released on both.

- Churn: 20,000 messages for 500 order ids, 3 consumers (one JVM each), 6 random departures (3
  clean stops, 3 kill -9) 3-4.5 s apart, each replaced at once. Per-order ordering, queue
  exclusivity between consumer processes, every message consumed; and after each kill every
  queue the dead consumer had consumed goes on within TAKEOVER_S, where Apache alone keeps it
  locked 40-60 s.
- Handoff: 2 consumers, 50 msgs/s; a clean stop (JVM warm-up, not judged), then two kill -9 of
  consumer A: B consumes from each of A's 4 queues (2 per broker) within 1 s of the kill, plus
  what the client itself needs (as test_orderly's ``_judge``: a 5.x client rebalances at most once
  a second and pulls a newly locked queue 500 ms after taking it, 1.5 s; a first pull answered
  SUBSCRIPTION_NOT_LATEST costs the client a 1 s retry).
- Every lock request of a departed client is released, not only its last one per broker and
  group (wire level, the way a Java client locks: its periodic ``lockAll`` batch, then single
  queues as rebalances add them).

Without the proxy an Apache 4.9.7 broker frees a dead consumer's locks only when they expire,
60 s after their last renewal (``rocketmq.broker.rebalance.lockMaxLiveTime``); clients renew every
20 s, so the survivor waits 40-60 s, plus up to 20 s until its next lock attempt.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from statistics import median

import pytest

from codec.bodies import LockBatchRequestBody, LockBatchResponseBody, MessageQueue
from codec.codes import RequestCode
from tests.interop.apache_cluster import ApacheCluster
from tests.interop.orderly import (
    ChurnEvent,
    Consumed,
    Handoff,
    compile_programs,
    read_log,
    route_listeners,
    run_handoffs,
    run_ordering,
)
from tests.interop.wire import WireClient
from tests.needs import require_java_tools

from .proxied import ONLY_5_ORACLE, ProxiedCluster

BROKERS = ("broker-a", "broker-b")
QUEUES_PER_BROKER = 4
LAYOUT = [(b, q) for b in BROKERS for q in range(QUEUES_PER_BROKER)]
TOTAL = 12_000
ORDERS = 500
EVENTS = 6
#: seconds between departures: a replacement JVM takes 2-4 s to start on a small machine, and
#: should hold and consume queues before it may be the next to go
GAP_S = (3.0, 4.5)
#: After a kill in the churn, each of the dead consumer's queues is consumed again within this
#: (from the kill, or from the message's send when later): the survivors rebalance and lock it at
#: once, while a replacement JVM starts on the same cores. Apache alone: 40 s or more.
TAKEOVER_S = 5.0
#: as tests/interop/test_orderly.py: what the client line itself adds, and a SUBSCRIPTION_NOT_LATEST retry
CLIENT_DELAY_MS = {"4.9": 0, "5": 1500}
IMMEDIATE_LIMIT_MS = 1000
NOT_LATEST_RETRY_MS = 1000


pytestmark = pytest.mark.apache_cluster("4.9.7")


@pytest.fixture(scope="module")
def proxied(apache_clusters: Callable[[str], ApacheCluster]) -> Iterator[ProxiedCluster]:
    """The session's shared 4.9.7 cluster and a proxy for the module (both client lines; each test
    has its own topic and group)."""
    require_java_tools("the orderly consumers")
    with ProxiedCluster(apache_clusters("4.9.7"), proxy_conf={"lockReleaseOnDisconnect": "immediate"}) as server:
        yield server


@pytest.fixture(scope="module")
def classpath(oracle_line: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    require_java_tools("the orderly consumers")
    return compile_programs(oracle_line, tmp_path_factory.mktemp(f"via-orderly-classes-{_tag(oracle_line)}"))


def _tag(line: str) -> str:
    return line.replace(".", "")


def _consumed_for_s(records: list[Consumed], session: str) -> float:
    starts = [r.start_us for r in records if r.session == session]
    return (max(starts) - min(starts)) / 1e6 if starts else 0.0


def _kill_takeovers(records: list[Consumed], timeline: list[ChurnEvent]) -> list[dict]:
    """Per kill, per queue the dead session consumed from: how long after the kill (or after the
    message's send, when later) another session first consumed from that queue. Queues with
    nothing consumed after the kill (all drained) are left out."""
    rows = []
    by_start = sorted(records, key=lambda r: r.start_us)
    for event in timeline:
        if event.kind != "kill":
            continue
        for key in sorted({r.key for r in records if r.session == event.session}):
            after = [r for r in by_start
                     if r.key == key and r.session != event.session and r.start_us > event.departed_us]  # fmt: skip
            if after:
                first = after[0]
                wait_s = (first.start_us - max(event.departed_us, first.born_ms * 1000)) / 1e6
                rows.append({"killed": event.session, "queue": key, "by": first.session, "wait_s": round(wait_s, 3)})
    return rows


@ONLY_5_ORACLE
def test_orderly_group_across_both_brokers_keeps_order_and_exclusivity_under_churn(
    oracle_line: str, classpath: str, proxied: ProxiedCluster, tmp_path: Path
) -> None:
    began = time.monotonic()
    run = run_ordering(
        classpath, proxied.namesrv, tmp_path, topic=f"ViaOrderly{_tag(oracle_line)}", total=TOTAL, orders=ORDERS,
        events=EVENTS, gap_s=GAP_S, queues=QUEUES_PER_BROKER, brokers=len(BROKERS), allocate="circle",
        drain_timeout=150.0,
    )  # fmt: skip
    check = run["check"]
    summary = check.summary()
    records: list[Consumed] = run["log"].records
    takeovers = _kill_takeovers(records, run["timeline"])
    print(f"\n{oracle_line}: {json.dumps(summary)}; producer {run['producer']}; churn {run['churn_s']} s, all sent "
          f"{run['produced_s']} s, all consumed {run['drained_s']} s (run {time.monotonic() - began:.0f} s); "
          f"timeline {[(e.at_s, e.kind, e.session) for e in run['timeline']]}; logs in {tmp_path}")  # fmt: skip
    print(f"{oracle_line}: after each kill -9, the dead consumer's queues went on in (s): {takeovers}")
    kinds = [e.kind for e in run["timeline"]]
    assert kinds.count("kill") == EVENTS // 2 and kinds.count("clean") == EVENTS // 2, kinds
    assert run["layout"] == LAYOUT, run["layout"]
    assert run["producer"]["sent"] == TOTAL, run["producer"]
    assert check.violations == 0, f"{summary} (logs in {tmp_path})"
    assert check.distinct == TOTAL and check.consumed >= TOTAL, summary
    # the group's locks spanned both brokers: every queue of both was consumed, and every consumer
    # that consumed for 6 s or more did so from both brokers (a shorter-lived one may have spent its
    # life waiting for the queues of one broker while the group settled after a start). The backlog
    # drains in about as long as the producer runs (6 s), so on a slow machine no consumer may reach
    # 6 s: then the one that consumed longest is judged.
    assert {r.key for r in records} == set(LAYOUT)
    spans = {s: _consumed_for_s(records, s) for s in run["sessions"]}
    lasting = [s for s, span in spans.items() if span >= 6.0] or [max(spans, key=spans.__getitem__)]
    print(f"{oracle_line}: consumed for (s): {({s: round(span, 1) for s, span in spans.items()})}")
    for s in lasting:
        assert {r.broker for r in records if r.session == s} == set(BROKERS), s
    # immediate release through the proxy: a killed consumer's queues do not wait for the lock
    # expiry, and at least one killed consumer had queues on both brokers to hand over
    killed = [e.session for e in run["timeline"] if e.kind == "kill"]
    assert any({t["queue"][0] for t in takeovers if t["killed"] == k} == set(BROKERS) for k in killed), takeovers
    slow = [t for t in takeovers if t["wait_s"] > TAKEOVER_S]
    assert not slow, f"queues of a killed consumer stood still (logs in {tmp_path}): {slow}\n{proxied.log_tail()}"


def _judge(line: str, handoffs: list[Handoff], event: int) -> list[Handoff]:
    mine = [h for h in handoffs if h.kind == "kill" and h.event == event]
    rows = [h.row() for h in mine]
    # the victim had 2 queues on each broker (circle allocation over 8 queues, 2 consumers)
    assert sorted((h.broker, h.queue % 2) for h in mine) in (
        sorted((b, 0) for b in BROKERS for _ in range(2)), sorted((b, 1) for b in BROKERS for _ in range(2))
    ), rows  # fmt: skip
    limit = IMMEDIATE_LIMIT_MS + CLIENT_DELAY_MS[line]
    assert median(h.handoff_ms for h in mine) <= limit, rows
    for h in mine:
        assert h.first_pull_ms is not None and h.takeover_ms is not None and h.takeover_ms >= 0, h.row()
        retry = NOT_LATEST_RETRY_MS if h.first_pull_code == "SUBSCRIPTION_NOT_LATEST" else 0
        assert h.handoff_ms <= limit + retry, h.row()
    return mine


def test_survivor_takes_over_a_killed_consumer_s_queues_on_both_brokers_within_1s(
    oracle_line: str, classpath: str, proxied: ProxiedCluster, tmp_path: Path
) -> None:
    handoffs = run_handoffs(
        classpath, proxied.namesrv, tmp_path, mode="immediate", topic=f"ViaHandoff{_tag(oracle_line)}",
        departures=[("clean", 0.0), ("kill", 0.0), ("kill", 0.0)], pull_log_dir=proxied.proxy.workdir / "pulls",
        queues=QUEUES_PER_BROKER, brokers=len(BROKERS), allocate="circle",
    )  # fmt: skip
    for h in handoffs:
        print(f"{oracle_line}: {h.row()}")
    for event in (1, 2):
        mine = _judge(oracle_line, handoffs, event)
        handoff_ms = [h.handoff_ms for h in mine]
        print(f"{oracle_line}: kill {event}: handoff ms median {median(handoff_ms):.0f} max {max(handoff_ms):.0f}; "
              f"takeover ms max {max(h.takeover_ms or 0 for h in mine):.0f}")  # fmt: skip
    # the proxy released the killed clients' locks itself (nothing else could, short of the expiry)
    killed = read_log([tmp_path / "A1.log", tmp_path / "A2.log"]).client_id
    log = proxied.proxy.log_tail(1 << 20)
    for session, client_id in killed.items():
        assert f"client {client_id} left: released its queue locks" in log, (session, client_id, proxied.log_tail())


def _lock(wire: WireClient, code: int, client_id: str, group: str, topic: str, queues: list[int]) -> list[int]:
    body = LockBatchRequestBody(
        consumer_group=group, client_id=client_id, only_this_broker=False,
        mq_set=[MessageQueue(topic=topic, broker_name="broker-a", queue_id=q) for q in queues],
    ).to_json()  # fmt: skip
    answer = wire.call(code, body=body)
    assert answer.code == 0, (answer.code, answer.remark)
    if code != RequestCode.LOCK_BATCH_MQ:
        return []
    return sorted(mq.queue_id for mq in LockBatchResponseBody.from_json(answer.body).lock_ok_mq_set)


def test_every_lock_request_of_a_departed_client_is_released(proxied: ProxiedCluster) -> None:
    """A Java client locks its queues in a batch (``lockAll``, every 20 s) and, in between, one by
    one as rebalances give it more, each a LOCK_BATCH_MQ of its own to the same broker and group.
    When it is gone, all of them must be released upstream, not just the last."""
    topic, group = "ViaLockRelease", "ViaLockRelease-cg"
    listeners = {broker: port for port, broker in route_listeners(proxied.namesrv, "TBW102").items()}
    addr = f"127.0.0.1:{listeners['broker-a']}"
    gone = WireClient(addr)
    assert _lock(gone, RequestCode.LOCK_BATCH_MQ, "10.9.9.9@1#1", group, topic, [0, 1]) == [0, 1]  # lockAll
    assert _lock(gone, RequestCode.LOCK_BATCH_MQ, "10.9.9.9@1#1", group, topic, [2]) == [2]  # a queue added later
    gone.sock.close()
    deadline = time.monotonic() + 2.0  # the release is one round trip to the broker
    with WireClient(addr) as survivor:
        while True:
            got = _lock(survivor, RequestCode.LOCK_BATCH_MQ, "10.9.9.8@2#2", group, topic, [0, 1, 2])
            if got == [0, 1, 2] or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        _lock(survivor, RequestCode.UNLOCK_BATCH_MQ, "10.9.9.8@2#2", group, topic, got)
    still = sorted({0, 1, 2} - set(got))
    assert got == [0, 1, 2], f"queues still locked by the departed client: {still}\n{proxied.log_tail()}"
