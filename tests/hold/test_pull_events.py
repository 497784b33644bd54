"""Held pulls through the whole server on task.Clock: the event log says what happened."""

from __future__ import annotations

import dataclasses
import json

from codec.codes import PullSysFlag, ResponseCode as R
from rmqproxy.observe.log_files import hour_of, log_file_name
from rmqproxy.observe.pull_events import PullEvent, PullLog

from ..server.harness import Client, make_server


def events(server) -> list[dict]:
    server.pull_log.close()
    lines = []
    for path in sorted(server.config.pull_log_dir.glob("pulls-*.jsonl")):
        lines += [json.loads(line) for line in path.read_text().splitlines()]
    return lines


def test_arrival_wake_is_logged_with_hold_and_service_time(tmp_path) -> None:
    server, reactor = make_server(tmp_path)
    consumer, producer = Client(server, "c@1#1"), Client(server, "p@1#1")
    consumer.heartbeat("cg", {"T": "*"})
    producer.send_message("T", b"first")
    opaque = consumer.pull_message("T", 1, sys_flag=PullSysFlag.SUSPEND)
    reactor.advance(2.5)
    producer.send_message("T", b"second")
    assert consumer.answer(opaque).code == R.SUCCESS
    server.stop()
    (event,) = [e for e in events(server) if e["held"]]
    assert (event["wake"], event["code"], event["hold_ms"], event["msgs"], event["mode"]) == (
        "arrival", "SUCCESS", 2500.0, 1, "long"
    )  # fmt: skip
    assert event["total_ms"] == 2500.0 and event["service_ms"] == 0.0
    assert (event["group"], event["topic"], event["client_id"], event["offset"], event["suspend_ms"]) == (
        "cg", "T", "c@1#1", 1, 15000
    )  # fmt: skip
    assert event["next_offset"] == 2 and event["max_offset"] == 2 and event["bytes"] > 0


def test_timeout_is_logged_as_such_and_every_pull_is_logged(tmp_path) -> None:
    server, reactor = make_server(tmp_path)
    client = Client(server)
    client.heartbeat("cg", {"T": "*"})
    client.send_message("T")
    client.answer(client.pull_message("T", 0))  # answered at once
    opaque = client.pull_message("T", 1, sys_flag=PullSysFlag.SUSPEND, suspend_timeout_millis=20000)
    reactor.advance(20)
    assert client.answer(opaque).code == R.PULL_NOT_FOUND
    server.stop()
    logged = events(server)
    assert [(e["held"], e["wake"], e["code"]) for e in logged] == [
        (False, "none", "SUCCESS"), (True, "timeout", "PULL_NOT_FOUND")
    ]  # fmt: skip
    assert logged[1]["hold_ms"] == 20000.0 and logged[1]["suspend_ms"] == 20000


def test_short_polling_holds_for_the_short_time(tmp_path) -> None:
    server, reactor = make_server(tmp_path, long_polling=False, short_polling_ms=1000)
    client = Client(server)
    client.heartbeat("cg", {"T": "*"})
    client.send_message("T")
    opaque = client.pull_message("T", 1, sys_flag=PullSysFlag.SUSPEND)
    reactor.advance(0.999)
    assert client.answer(opaque) is None
    reactor.advance(0.001)
    assert client.answer(opaque).code == R.PULL_NOT_FOUND
    server.stop()
    assert events(server)[-1]["mode"] == "short"


def test_held_mode_logs_only_held_pulls_and_off_logs_nothing(tmp_path) -> None:
    for mode, expected in (("held", 1), ("off", 0)):
        server, reactor = make_server(tmp_path / mode, pull_log_mode=mode)
        client = Client(server)
        client.heartbeat("cg", {"T": "*"})
        client.send_message("T")
        client.answer(client.pull_message("T", 0))
        client.pull_message("T", 1, sys_flag=PullSysFlag.SUSPEND)
        reactor.advance(15)
        server.stop()
        assert len(events(server)) == expected


def test_past_max_held_pulls_are_answered_at_once(servers, tmp_path) -> None:
    server, reactor = servers(tmp_path, max_held_pulls=1)
    client = Client(server)
    client.heartbeat("cg", {"T": "*"})
    client.send_message("T")
    first = client.pull_message("T", 1, sys_flag=PullSysFlag.SUSPEND)
    second = client.pull_message("T", 1, sys_flag=PullSysFlag.SUSPEND)
    assert client.answer(first) is None
    assert client.answer(second).code == R.PULL_NOT_FOUND


def test_log_files_rotate_by_utc_hour(tmp_path) -> None:
    assert log_file_name(hour_of(1_700_000_000_000), "local") == "pulls-20231114-22-local-0.jsonl"
    log = PullLog(tmp_path)
    fields = dict(arrived_ms=0, group="g", topic="T", queue_id=0, client_id="c", remote="r", offset=0, max_msgs=32,
                  suspend_ms=0, held=False, hold_ms=0.0, service_ms=0.1, total_ms=0.1, wake="none", mode="long",
                  code="SUCCESS", msgs=1, bytes=10, next_offset=1, max_offset=1)  # fmt: skip
    for ts in (1_700_000_000_000, 1_700_000_000_001, 1_700_000_000_000 + 3_600_000):
        log(PullEvent(ts_ms=ts, **fields))
    log.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pulls-20231114-22-local-0.jsonl", "pulls-20231114-23-local-0.jsonl"]
    assert len((tmp_path / "pulls-20231114-22-local-0.jsonl").read_text().splitlines()) == 2


def test_every_logged_event_names_the_instance_that_wrote_it(tmp_path) -> None:
    server, _reactor = make_server(tmp_path)
    client = Client(server, "c@1#1")
    client.heartbeat("cg", {"T": "*"})
    client.answer(client.pull_message("T", 0))
    (logged,) = events(server)
    assert logged["instance"] == server.config.advertised_address
    assert list(logged)[-1] == "instance"  # the schema's order: the log's stamp replaced the empty field
    log = PullLog(tmp_path / "other", instance='10.0.0.7:10911')
    log(_event(1_700_000_000_000))
    log(dataclasses.replace(_event(1_700_000_000_000), instance="10.0.0.8:10911"))  # an event that names one keeps it
    log.close()
    (path,) = (tmp_path / "other").iterdir()
    assert path.name == "pulls-20231114-22-10.0.0.7_10911-0.jsonl"
    first, second = (json.loads(x) for x in path.read_text().splitlines())
    assert first == {**dataclasses.asdict(_event(1_700_000_000_000)), "instance": "10.0.0.7:10911"}
    assert second["instance"] == "10.0.0.8:10911"


def _event(ts_ms: int) -> PullEvent:
    return PullEvent(ts_ms, ts_ms, "cg", "T", 0, "c@1", "10.0.0.5:1", 0, 32, 15000, False, 0.0, 1.0, 1.0, "none",
                     "long", "PULL_NOT_FOUND", 0, 0, 0, 0)  # fmt: skip


def test_a_failed_write_drops_its_events_counts_them_and_the_writer_goes_on(tmp_path) -> None:
    log = PullLog(tmp_path / "logs")
    first, second = 1_700_000_000_000, 1_700_000_000_000 + 3_600_000  # two UTC hours: two files
    (tmp_path / "logs" / log_file_name(hour_of(first), "local")).mkdir()  # writing this "file" fails (a directory)
    for ts in (first, first, second):
        log(_event(ts))
    log.close()
    assert (log.dropped, log.written) == (2, 1)
    assert len((tmp_path / "logs" / log_file_name(hour_of(second), "local")).read_text().splitlines()) == 1


def test_events_past_the_writers_queue_bound_are_dropped_and_counted(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("rmqproxy.observe.pull_events.MAX_QUEUED_BYTES", 10)  # any chunk is more than the writer may owe
    log = PullLog(tmp_path / "logs")
    log(_event(1_700_000_000_000))
    log.flush()
    log.close()
    assert (log.dropped, log.written) == (1, 0)


def test_dropped_pull_events_are_exported(servers, tmp_path) -> None:
    server, _reactor = servers(tmp_path)
    server.pull_log.dropped = 3
    assert server.registry.get_sample_value("rmqproxy_pull_log_dropped_total") == 3
