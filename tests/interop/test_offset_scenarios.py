"""Consumers never skip messages or stall on offsets (issue 23): real Java push consumers of both
client lines, with offsets stored and read in raw frames (``wire.WireClient``) as a non-Java client
would, against rmqproxy and against the reference Apache RocketMQ 4.9.7 broker, so every assertion
is checked against the reference in the same run.

Where the reference differs: 5.x mqadmin consumerProgress calls GET_TOPIC_CONFIG (351), which 4.9.x
answers "not supported" (``scenario_checks.reference_gap``); that step is checked as the gap there.
When the client skips the heartbeat that carries its new subVersion (``scenario_checks.heartbeat_race``),
the reference refuses the tag consumer's pulls until the next heartbeat, up to 30 s, where rmqproxy
serves them unfiltered and reaches the queue ends within one suspend.
"""

from __future__ import annotations

import re
import time
import pytest

from codec.codes import RequestCode as C
from codec.codes import ResponseCode as R

from .scenario_checks import (assert_all_received, explain, heartbeat_race, no_error, reference_gap, send_to_new_topic,
                              servers_fixture)
from .scenario_runner import ScenarioProgram, unique_name
from .server import ScenarioServer
from .wire import WireClient


server = servers_fixture("rmqproxy", "apache")  # the same assertions hold for both

#: brokerSuspendMaxTimeMillis a push consumer asks for (both client lines).
SUSPEND_MS = 15_000


def test_a_group_whose_stored_offsets_are_minus_one_consumes_every_message(
    program: ScenarioProgram, server: ScenarioServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Offsets of -1, as a non-Java client commits them for queues it has not consumed, are no offset:
    a LAST_OFFSET push consumer joining the group starts where the queues still start (0), not at
    their end, and receives every message."""
    sent = send_to_new_topic(program, server, tmp_path_factory, "NegOffset", count=128)
    no_error(sent, server)
    group = unique_name("NegOffsetCg", program.line)
    queues = sorted(int(q) for q in sent["queues"])
    with WireClient(server.broker_addr) as wire:
        for queue_id in queues:
            stored = wire.call(C.UPDATE_CONSUMER_OFFSET, consumer_group=group, topic=sent["topic"], queue_id=queue_id,
                               commit_offset=-1)
            assert stored.code == R.SUCCESS, stored
            answer = wire.call(C.QUERY_CONSUMER_OFFSET, consumer_group=group, topic=sent["topic"], queue_id=queue_id)
            assert (answer.code, (answer.ext_fields or {}).get("offset")) == (R.SUCCESS, "0"), answer
    r = program.run("push", namesrv=server.namesrv, manifest=sent["_manifest"], group=group, timeout_ms=60000,
                    **{"from": "last"})
    no_error(r, server)
    assert_all_received(r, server, "LAST_OFFSET push consumer of a group with offsets -1")


def _committed_offsets(wire: WireClient, group: str, topic: str, queues: list[int]) -> dict[int, int | None]:
    committed = {}
    for queue_id in queues:
        answer = wire.call(C.QUERY_CONSUMER_OFFSET, consumer_group=group, topic=topic, queue_id=queue_id)
        committed[queue_id] = int(answer.ext_fields["offset"]) if answer.code == R.SUCCESS else None
    return committed


def test_a_tag_filtered_consumer_of_only_other_tags_commits_the_queue_ends_at_once(
    program: ScenarioProgram, server: ScenarioServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Queues of TagB messages only, and a push consumer of TagA: each pull's scan finds nothing and is
    answered at once with the offset it reached, so the group's committed offsets reach the queues' ends
    within 1 s of the consumer's first pull on rmqproxy (the reference's time is printed) and
    consumerProgress shows no lag."""
    sent = send_to_new_topic(program, server, tmp_path_factory, "TagSkip", count=400, tags="TagB")
    no_error(sent, server)
    topic, group = sent["topic"], unique_name("TagSkipCg", program.line)
    queues = sorted(int(q) for q in sent["queues"])
    run = program.start("tagskip", namesrv=server.namesrv, manifest=sent["_manifest"], group=group)
    try:
        first_pull_ms = run.wait_progress("first_pull_ms", 1, timeout=90)["first_pull_ms"]
        with WireClient(server.broker_addr) as wire:
            ends = {q: int(wire.call(C.GET_MAX_OFFSET, topic=topic, queue_id=q).ext_fields["offset"]) for q in queues}
            deadline = time.monotonic() + 60  # a skipped heartbeat leaves the reference refusing pulls for 30 s
            while (committed := _committed_offsets(wire, group, topic, queues)) != ends:
                assert time.monotonic() < deadline, f"committed {committed}, queue ends {ends}\n{server.log_tail(2000)}"
                time.sleep(0.01)
            caught_up_ms = time.time() * 1000
        r = run.finish(timeout=120)
    finally:
        run.kill()
    no_error(r, server)
    assert r["deliveries"] == 0, explain(r, server, "deliveries")
    took_ms = caught_up_ms - first_pull_ms
    if heartbeat_race(r["_log_dir"]):
        # The client skipped the heartbeat with its new subVersion: rmqproxy served the pulls
        # unfiltered, the client dropped the TagB messages itself without recording an offset, and
        # only the next answer to its held pull at the queue end (one suspend, 15 s) moved it on.
        # The reference refuses those pulls (25) until the next scheduled heartbeat, 30 s on.
        print(f"tagskip: the client skipped a heartbeat; queue ends committed {took_ms:.0f} ms after the first pull")
        if server.name == "rmqproxy":
            assert took_ms <= SUSPEND_MS + 1000, f"committed offsets reached the queue ends {took_ms:.0f} ms after the first pull"
    elif server.name == "rmqproxy":
        assert took_ms <= 1000, f"committed offsets reached the queue ends {took_ms:.0f} ms after the first pull"
    else:
        # The reference usually commits within 1 s too, but took 9.7 s in one CI run of ten (both lines):
        # a figure to compare, not a bound it is held to.
        print(f"tagskip: {server.name} committed the queue ends {took_ms:.0f} ms after the first pull")
    progress = r["consumer_progress"]
    rows = [ln.split() for ln in progress["stdout"].splitlines() if ln.startswith(topic + " ")]
    ok = (sorted(int(row[2]) for row in rows) == queues and all(row[3] == row[4] for row in rows)
          and re.search(r"Diff Total:\s*0\b", progress["stdout"]) is not None
          and (program.line != "5" or re.search(r"Inflight Total:\s*0\b", progress["stdout"]) is not None))
    gap = reference_gap(server, program.line, "consumerProgress")
    if gap:
        assert not ok and "not supported" in progress["stderr"], f"expected the reference gap ({gap})"
        return
    assert ok, f"consumerProgress shows lag or in-flight messages:\n{progress['stdout']}{progress['stderr'][-1500:]}"
    print(f"tagskip: committed offsets at the queue ends {caught_up_ms - first_pull_ms:.0f} ms after the first pull")
