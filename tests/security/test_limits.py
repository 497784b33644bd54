"""Bounds one client cannot push past to hurt the others (issue 24): held pulls per connection, the
hold a pull may ask for, the listen backlog; and broker.conf keys that promise protection
rmqproxy does not give stop startup instead of being ignored."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from twisted.logger import globalLogPublisher

from codec.codes import PullSysFlag, RequestCode as C
from codec.codes import ResponseCode as R
from codec.headers import PullMessageResponseHeader
from rmqproxy.cli import main
from rmqproxy.core.config import load

from ..server.harness import Client, make_server

SUSPEND = PullSysFlag.SUSPEND


def test_one_connection_cannot_take_every_held_pull(servers, tmp_path) -> None:
    server, reactor = servers(tmp_path, max_held_pulls=100, max_held_pulls_per_connection=3)
    hog, other = Client(server, "hog@1"), Client(server, "other@1")
    hog.send_message("T")
    held = [hog.pull_message("T", 1, sys_flag=SUSPEND, suspend_timeout_millis=15000) for _ in range(3)]
    refused = hog.answer(hog.pull_message("T", 1, sys_flag=SUSPEND, suspend_timeout_millis=15000))
    assert refused.code == R.SYSTEM_BUSY and "maxHeldPullsPerConnection" in refused.remark
    assert all(hog.answer(o) is None for o in held) and server.holds.count == 3
    # another consumer's long poll still waits its full suspend, then gets PULL_NOT_FOUND
    opaque = other.pull_message("T", 1, sys_flag=SUSPEND, suspend_timeout_millis=15000)
    reactor.advance(14.999)
    assert other.answer(opaque) is None
    reactor.advance(0.001)
    assert other.answer(opaque).code == R.PULL_NOT_FOUND


def test_at_max_held_pulls_another_connections_long_poll_is_held_and_the_hog_gives_way(servers, tmp_path) -> None:
    """Issue 40: one connection holding every held pull no longer turns another client's long poll
    into an answer after a millisecond; the hog's newest held pull is answered SYSTEM_BUSY instead,
    which a Java client answers by backing off, and that is counted as a rejection and a wake."""
    server, reactor = servers(tmp_path, max_held_pulls=4)
    hog, other = Client(server, "hog@1"), Client(server, "other@1")
    hog.send_message("T")
    held = [hog.pull_message("T", 1, sys_flag=SUSPEND, suspend_timeout_millis=15000) for _ in range(4)]
    assert all(hog.answer(o) is None for o in held) and server.holds.count == 4
    reactor.advance(0.001)
    opaque = other.pull_message("T", 1, sys_flag=SUSPEND, suspend_timeout_millis=2000)
    assert other.answer(opaque) is None and server.holds.count == 4
    busy = hog.answer(held[-1])
    assert busy is not None and busy.code == R.SYSTEM_BUSY
    assert "maxHeldPulls 4" in busy.remark and "fair share of 2" in busy.remark
    assert "this connection holds 4" in busy.remark
    assert all(hog.answer(o) is None for o in held[:-1])
    reactor.advance(1.999)
    assert other.answer(opaque) is None
    reactor.advance(0.001)
    assert other.answer(opaque).code == R.PULL_NOT_FOUND
    assert server.rejections.counts == {"over_fair_share": 1}
    assert server.holds.wakeups == {"evicted": 1, "timeout": 1}
    sample = server.registry.get_sample_value
    labels = {"topic": "T", "consumer_group": "cg"}
    assert sample("rmqproxy_rejected_requests_total", {"reason": "over_fair_share"}) == 1
    assert sample("rmqproxy_hold_wakeups_total", {**labels, "wake": "evicted"}) == 1
    assert sample("rmqproxy_pull_latency_seconds_count", {**labels, "code": "SYSTEM_BUSY", "held": "true"}) == 1


def test_a_hog_alone_at_max_held_pulls_gets_its_next_pull_answered_at_once(servers, tmp_path) -> None:
    server, reactor = servers(tmp_path, max_held_pulls=3)
    hog = Client(server, "hog@1")
    hog.send_message("T")
    held = [hog.pull_message("T", 1, sys_flag=SUSPEND, suspend_timeout_millis=15000) for _ in range(3)]
    answer = hog.answer(hog.pull_message("T", 1, sys_flag=SUSPEND, suspend_timeout_millis=15000))
    assert answer is not None and answer.code == R.PULL_NOT_FOUND  # as before: its fair share is the whole cap
    assert all(hog.answer(o) is None for o in held) and server.holds.count == 3
    assert not server.rejections.counts and "evicted" not in server.holds.wakeups


def test_the_hold_a_pull_asks_for_is_cut_to_the_cap(servers, tmp_path) -> None:
    server, reactor = servers(tmp_path, max_pull_suspend_ms=30_000)
    client = Client(server)
    client.send_message("T")
    opaque = client.pull_message("T", 1, sys_flag=SUSPEND, suspend_timeout_millis=3_600_000)
    reactor.advance(29.999)
    assert client.answer(opaque) is None
    reactor.advance(0.001)
    answer = client.answer(opaque)
    assert (answer.code, PullMessageResponseHeader.from_ext(answer.ext_fields).next_begin_offset) == (
        R.PULL_NOT_FOUND, 1
    )  # fmt: skip


def test_the_listen_backlog_is_server_socket_backlog(tmp_path) -> None:
    server, reactor = make_server(tmp_path, broker_listen_port=10911)
    server.stop()
    assert reactor.backlogs == [1024, 1024, 1024]  # 9876, 10911 and its fast port 10909
    server, reactor = make_server(tmp_path / "b", server_socket_backlog=4096)
    server.stop()
    assert reactor.backlogs == [4096, 4096]


@pytest.mark.parametrize(
    "line",
    ["authenticationEnabled=true", "authorizationEnabled = TRUE", "brokerRole=SYNC_MASTER",
     "brokerRole=SLAVE", "enableDLegerCommitLog=true", "enableControllerMode=true"],
)
def test_a_key_promising_protection_stops_startup_naming_it(tmp_path: Path, line: str) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerName=b\n{line}\n")
    key = line.split("=")[0].strip()
    with pytest.raises(ValueError, match=key):
        load(conf)
    result = CliRunner().invoke(main, ["serve", "-c", str(conf), "--store-path-root-dir", str(tmp_path / "s")])
    assert result.exit_code != 0 and key in result.output
    assert not (tmp_path / "s").exists()  # refused before anything was opened


@pytest.mark.parametrize("line", ["authenticationEnabled=false", "brokerRole=ASYNC_MASTER", "enableDLegerCommitLog=false"])
def test_the_same_keys_set_to_what_rmqproxy_does_are_accepted(tmp_path: Path, line: str) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(f"{line}\n")
    assert load(conf).extra == dict([line.split("=")])


def test_ignored_keys_are_logged_at_start(tmp_path: Path) -> None:
    events: list[dict] = []
    globalLogPublisher.addObserver(events.append)
    try:
        server, _reactor = make_server(tmp_path, extra={"sendMessageThreadPoolNums": "16", "brokerId": "0"})
        server.stop()
    finally:
        globalLogPublisher.removeObserver(events.append)
    ignored = [e for e in events if "ignored" in e.get("log_format", "")]
    assert len(ignored) == 1 and ignored[0]["keys"] == "brokerId, sendMessageThreadPoolNums"


def test_rejected_requests_are_counted_and_logged_at_a_bounded_rate(tmp_path: Path) -> None:
    server, reactor = make_server(tmp_path)
    events: list[dict] = []
    globalLogPublisher.addObserver(events.append)
    try:
        client = Client(server)
        for _ in range(500):
            assert client.answer(client.send(C.PULL_MESSAGE, ext={})).code == R.SYSTEM_ERROR  # no header fields
        for _ in range(300):
            assert client.answer(client.send(9999)).code == R.REQUEST_CODE_NOT_SUPPORTED
        reactor.advance(60)
        client.answer(client.send(C.PULL_MESSAGE, ext={}))
    finally:
        globalLogPublisher.removeObserver(events.append)
        server.stop()
    registry = server.registry
    assert registry.get_sample_value("rmqproxy_rejected_requests_total", {"reason": "bad_request"}) == 501
    assert registry.get_sample_value("rmqproxy_rejected_requests_total", {"reason": "unsupported_code"}) == 300
    logged = [e for e in events if e.get("reason") == "bad_request" and "n" not in e]
    summary = [e for e in events if e.get("reason") == "bad_request" and "n" in e]
    assert len(logged) == 11 and [e["n"] for e in summary] == [490]  # 10 a minute, then a count
    assert len([e for e in events if e.get("reason") == "unsupported_code"]) == 10


@pytest.mark.parametrize(("read", "write"), [(2_147_483_647, 4), (4, 1025), (0, 4), (-1, -1)])
def test_update_topic_refuses_queue_counts_outside_the_bound(servers, tmp_path: Path, read: int, write: int) -> None:
    """A topic of 2^31 queues made every loop over its queues (consume stats, topic stats) eat the
    machine's memory: the soak's fuzz found it."""
    server, _reactor = servers(tmp_path)
    answer = Client(server).call(
        C.UPDATE_AND_CREATE_TOPIC, topic="Many", default_topic="TBW102", read_queue_nums=read,
        write_queue_nums=write, perm=6, topic_filter_type="SINGLE_TAG", order=False,
    )  # fmt: skip
    assert answer.code == R.SYSTEM_ERROR and "maxTopicQueueNums" in answer.remark
    assert server.topics.get("Many") is None
