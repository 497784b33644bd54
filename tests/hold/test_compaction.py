"""Compaction of the pull event log: closed JSON-lines files become typed, partitioned Parquet,
lines that are not events are kept as they were, and a crash at any step leaves every event
counted once."""

from __future__ import annotations

import calendar
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from rmqproxy.cli import main
from rmqproxy.observe import compaction, rollup
from rmqproxy.observe.compaction import (
    COLUMNS,
    SCHEMA_VERSION,
    Busy,
    Pacer,
    closed_files,
    compact,
    compact_file,
    dataset_files,
    folder_lock,
    sidecar,
    twin,
)
from rmqproxy.observe.log_files import log_file_name, scan
from rmqproxy.observe.pull_events import COMPACT_NICENESS, PullEvent, PullLog, yield_cores

HOUR_START = calendar.timegm(time.strptime("2023111422", "%Y%m%d%H"))


def event(i: int, **changes) -> PullEvent:
    fields = dict(ts_ms=HOUR_START * 1000 + i, arrived_ms=HOUR_START * 1000, group="cg", topic="T", queue_id=i % 4,
                  client_id="c@1", remote="10.0.0.5:1", offset=i, max_msgs=32, suspend_ms=15000, held=i % 2 == 0,
                  hold_ms=1.5 * i, service_ms=0.25, total_ms=1.5 * i + 0.25, wake="arrival", mode="long",
                  code="SUCCESS", msgs=1, bytes=100, next_offset=i + 1, max_offset=10_000)  # fmt: skip
    fields.update(changes)
    return PullEvent(**fields)


BAD = [
    b'{"ts_ms":1,"arrived_ms"\n',  # torn
    json.dumps({**event(0).__dict__, "queue_id": "0"}).encode() + b"\n",  # a string for an int
    json.dumps({**event(0).__dict__, "held": 1}).encode() + b"\n",  # an int for a bool
    json.dumps({**event(0).__dict__, "offset": True}).encode() + b"\n",  # a bool for a long
    json.dumps({**event(0).__dict__, "queue_id": 1 << 31}).encode() + b"\n",  # past an int
    json.dumps({**event(0).__dict__, "extra": 1}).encode() + b"\n",  # unknown field
    json.dumps({k: v for k, v in event(0).__dict__.items() if k != "code"}).encode() + b"\n",  # missing one
]


def write_log(directory: Path, events: list[PullEvent], extra: list[bytes] = (), number: int = 0) -> Path:
    path = directory / log_file_name("20231114-22", "10.0.0.1_9876", number)
    path.write_bytes(b"".join(e.json_line() + b"\n" for e in events) + b"".join(extra))
    return path


def test_a_compacted_file_holds_every_event_typed_and_the_rest_as_it_was(tmp_path: Path) -> None:
    events = [event(i) for i in range(50)] + [event(50, hold_ms=3)]  # an int where a double goes is a double
    jsonl = write_log(tmp_path, events, BAD)
    parquet = compact_file(jsonl)
    assert parquet == tmp_path / "date=20231114" / "hour=22" / "pulls-20231114-22-10.0.0.1_9876-0.parquet"
    assert not jsonl.exists()
    table = pq.read_table(parquet)
    assert table.schema.metadata[b"rmqproxy.schema_version"] == str(SCHEMA_VERSION).encode()
    assert [(f.name, str(f.type)) for f in table.schema] == [
        (name, {"long": "int64", "int": "int32", "str": "string", "bool": "bool", "double": "double"}[kind])
        for name, kind in COLUMNS
    ]
    assert table.to_pylist() == [json.loads(e.json_line()) for e in events]
    assert sidecar(parquet).read_bytes() == b"".join(BAD)


def test_a_line_from_before_a_column_was_added_compacts_with_its_default(tmp_path: Path) -> None:
    new = event(1, instance="10.0.0.1:9876")
    old = {k: v for k, v in dataclasses.asdict(event(2)).items() if k not in compaction.ADDED}  # as version 1 wrote it
    jsonl = write_log(tmp_path, [new], [json.dumps(old).encode() + b"\n"])
    table = pq.read_table(compact_file(jsonl))
    assert table.column("instance").to_pylist() == ["10.0.0.1:9876", ""]
    assert table.to_pylist()[1] == {**old, **compaction.ADDED}  # instance "", protocol "remoting"
    assert not sidecar(twin(jsonl)).exists()


def test_only_closed_files_are_compacted(tmp_path: Path) -> None:
    first = write_log(tmp_path, [event(1)], number=0)
    second = write_log(tmp_path, [event(2)], number=1)
    other = tmp_path / log_file_name("20231114-22", "10.0.0.2_9876", 0)  # another instance's current file
    other.write_bytes(event(3).json_line() + b"\n")
    during = HOUR_START + 1800
    for path in (first, second, other):
        os.utime(path, (during, during))  # last written half-way through the hour
    assert closed_files(tmp_path, during) == [first]  # rolled over: a later file of its instance exists
    assert closed_files(tmp_path, HOUR_START + 3600 + 299) == [first]
    assert set(closed_files(tmp_path, HOUR_START + 3600 + 300)) == {first, second, other}  # the hour ended 5 min ago
    os.utime(second, (HOUR_START + 3600 + 100, HOUR_START + 3600 + 100))  # a late write, after the hour
    assert second not in closed_files(tmp_path, HOUR_START + 3600 + 300)  # idle for less than 5 min
    assert compact(tmp_path, now=during) == [twin(first)]
    assert not first.exists() and second.exists() and other.exists()


def test_a_workers_file_is_closed_by_its_own_later_file_not_by_another_workers(tmp_path: Path) -> None:
    during = HOUR_START + 1800
    paths = {}
    for name, number in (("10.0.0.1_9876.w1", 0), ("10.0.0.1_9876.w1", 1), ("10.0.0.1_9876.w2", 0),
                         ("10.0.0.1_9876.w10", 0), ("10.0.0.1_9876", 0)):  # fmt: skip
        paths[name, number] = tmp_path / log_file_name("20231114-22", name, number)
        paths[name, number].write_bytes(event(number).json_line() + b"\n")
        os.utime(paths[name, number], (during, during))
    assert closed_files(tmp_path, during) == [paths["10.0.0.1_9876.w1", 0]]  # w2, w10 and the plain one still write
    assert len(closed_files(tmp_path, HOUR_START + 3600 + 300)) == 5


def test_every_event_is_counted_once_whatever_step_a_crash_stopped_at(tmp_path: Path, monkeypatch) -> None:
    jsonl = write_log(tmp_path, [event(i) for i in range(5)], BAD[:1])
    parquet = twin(jsonl)

    def crash(*_args) -> None:
        raise KeyboardInterrupt("killed before the Parquet file's rename")

    real_rename = compaction._write_then_rename
    monkeypatch.setattr(compaction, "_write_then_rename", lambda path, write: (
        real_rename(path, write) if path.suffix == ".jsonl" else crash()))  # fmt: skip
    with pytest.raises(KeyboardInterrupt):
        compact_file(jsonl)
    assert sidecar(parquet).exists() and not parquet.exists()
    assert dataset_files(tmp_path) == ([jsonl], [])  # the JSON counts; the orphan sidecar does not
    monkeypatch.undo()
    monkeypatch.setattr(Path, "unlink", lambda self, missing_ok=False: None)  # killed before the delete
    compact_file(jsonl)
    assert jsonl.exists() and parquet.exists()
    assert dataset_files(tmp_path) == ([sidecar(parquet)], [parquet])  # the Parquet counts, the JSON no more
    monkeypatch.undo()
    assert compact_file(jsonl) == parquet and not jsonl.exists()  # the next pass only deletes
    assert pq.read_table(parquet).num_rows == 5


def test_one_compactor_at_a_time(tmp_path: Path) -> None:
    write_log(tmp_path, [event(1)], number=0)
    last = write_log(tmp_path, [event(2)], number=1)
    os.utime(last, (HOUR_START + 1800, HOUR_START + 1800))  # written back then, idle since
    with folder_lock(tmp_path, wait=False):
        with pytest.raises(Busy):
            compact(tmp_path, now=HOUR_START + 1800)
        result = CliRunner().invoke(main, ["compact", "--no-wait", str(tmp_path)])
        assert result.exit_code == 0 and "another compaction" in result.output
    result = CliRunner().invoke(main, ["compact", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert len(dataset_files(tmp_path)[1]) == 2  # both closed: their hour ended, and they are idle


def test_retention_counts_compacted_files(tmp_path: Path) -> None:
    compact_file(write_log(tmp_path, [event(i) for i in range(20)], BAD[:2]))
    names = sorted(f.path.name for f in scan(tmp_path))
    stem = "pulls-20231114-22-10.0.0.1_9876-0"
    assert names == [f"{stem}.parquet", f"{stem}.rejected.jsonl", f"{stem}.v1.k1024.s1000.cells"]


def test_the_log_compacts_its_closed_files_in_a_child_process(tmp_path: Path) -> None:
    old = write_log(tmp_path, [event(i) for i in range(3)])
    os.utime(old, (HOUR_START + 1800, HOUR_START + 1800))
    log = PullLog(tmp_path, instance="10.0.0.9:9876", compact=rollup.Options(short_polling_ms=700), max_bytes=1 << 30, retention_hours=10**6)
    now_ms = int(time.time() * 1000)
    log(event(0, ts_ms=now_ms, arrived_ms=now_ms))
    log.flush()  # the writer thread takes the chunk, and starts the compaction first
    deadline = time.monotonic() + 120
    while log._compactor is None or log._compactor.poll() is None:
        assert time.monotonic() < deadline, "the compaction did not start and end in 120 s"
        time.sleep(0.05)  # a real child process: nothing to advance but time
    log.close()
    assert log.compactions == 1 and log._compactor.returncode == 0
    assert not old.exists() and pq.read_table(twin(old)).num_rows == 3
    assert rollup.rollup_path(twin(old), 1024, 700).exists()  # for the server's short polling time
    assert len(list(tmp_path.glob("pulls-*-10.0.0.9_9876-0.jsonl"))) == 1  # its own file stays JSON lines


def test_a_paced_compaction_sleeps_until_it_has_used_its_share_of_a_core() -> None:
    clock = {"cpu": 0.0, "wall": 0.0}
    slept = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock["wall"] += seconds

    pace = Pacer(0.25, cpu=lambda: clock["cpu"], wall=lambda: clock["wall"], sleep=sleep)
    clock["cpu"] += 0.010
    clock["wall"] += 0.010  # 10 ms of work: it may take 40 ms of wall time
    pace()
    assert slept == [pytest.approx(0.030)]
    clock["wall"] += 0.100  # idle meanwhile (reading a file): credit for later work
    clock["cpu"] += 0.020
    clock["wall"] += 0.020
    pace()
    assert len(slept) == 1
    full = Pacer(cpu=lambda: clock["cpu"], wall=lambda: clock["wall"], sleep=sleep)
    clock["cpu"] += 1.0
    full()
    assert len(slept) == 1  # share 1: never sleeps
    with pytest.raises(ValueError):
        Pacer(0)
    calls = []
    compaction.parse(b"".join(e.json_line() + b"\n" for e in [event(i) for i in range(5000)]), lambda: calls.append(1))
    assert len(calls) == 3  # lines 0, 2048 and 4096


def test_closing_the_log_stops_a_compaction_under_way(tmp_path: Path) -> None:
    log = PullLog(tmp_path, instance="10.0.0.9:9876", compact=rollup.Options(short_polling_ms=700), max_bytes=1 << 30, retention_hours=10**6)
    log._compactor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    log.close()
    assert log._compactor.returncode is not None


def test_the_compaction_process_runs_only_on_idle_cores() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        yield_cores(child.pid)
        if hasattr(os, "SCHED_IDLE"):
            assert os.sched_getscheduler(child.pid) == os.SCHED_IDLE
        else:
            assert os.getpriority(os.PRIO_PROCESS, child.pid) == COMPACT_NICENESS
    finally:
        child.communicate(b"")


def test_a_rollup_holds_the_cells_of_its_file(tmp_path: Path) -> None:
    """Counts, sums, maxima and sketches per window cell and per queue cell, the overshoot of a
    short-mode timeout measured against the short polling time the rollup was made for."""
    from datasketches import kll_doubles_sketch

    events = [event(i) for i in range(100)] + [
        event(100, wake="timeout", mode="short", suspend_ms=0, held=True, hold_ms=1003.0, code="PULL_NOT_FOUND"),
        event(101, wake="timeout", hold_ms=15002.5, held=True, client_id="", remote="10.0.0.6:2"),
    ]
    parquet = compact_file(write_log(tmp_path, events), cells=rollup.Options(sketch_k=64, short_polling_ms=1000))
    cells = pq.read_table(rollup.rollup_path(parquet, 64, 1000)).to_pylist()
    windows = {c["suspendable"]: c for c in cells if c["kind"] == "window"}
    queues = {(c["queue_id"], c["client"]): c for c in cells if c["kind"] == "queue"}
    assert set(windows) == {True, False} and len(cells) == 2 + len(queues)
    assert set(queues) == {(q, "c@1") for q in range(4)} | {(1, "10.0.0.6:2")}
    held = windows[True]
    assert (held["pulls"], held["held_pulls"], held["found_pulls"], held["timeouts_measured"]) == (101, 51, 101, 1)
    assert held["hold_ms_max"] == 15002.5 and held["overshoot_ms_sum"] == pytest.approx(2.5)
    assert held["_wake_arrival"] == 100 and held["_wake_timeout"] == 1
    assert held["first_ts_ms"] == HOUR_START * 1000 and held["last_ts_ms"] == HOUR_START * 1000 + 101
    short = windows[False]
    assert (short["pulls"], short["found_pulls"], short["overshoot_ms_max"]) == (1, 0, pytest.approx(3.0))
    hold = kll_doubles_sketch.deserialize(held["_hold_sketch"])
    assert hold.n == 51 and hold.k == 64 and hold.get_max_value() == 15002.5  # held pulls only
    assert kll_doubles_sketch.deserialize(held["_total_sketch"]).n == 101
    assert kll_doubles_sketch.deserialize(queues[(2, "c@1")]["_overshoot_sketch"]).is_empty()
    assert queues[(2, "c@1")]["overshoot_ms_max"] is None and queues[(2, "c@1")]["overshoot_ms_sum"] is None
    assert queues[(0, "c@1")]["overshoot_ms_max"] == pytest.approx(3.0)


def test_compacting_again_adds_a_rollup_for_other_options_and_leaves_the_rest(tmp_path: Path) -> None:
    parquet = compact_file(write_log(tmp_path, [event(i) for i in range(10)]))
    before = parquet.stat().st_mtime_ns
    assert compact(tmp_path, now=HOUR_START, cells=rollup.Options(2048, 500)) == []
    assert rollup.rollup_path(parquet, 1024, 1000).exists() and rollup.rollup_path(parquet, 2048, 500).exists()
    assert parquet.stat().st_mtime_ns == before
    assert pq.read_table(rollup.rollup_path(parquet, 2048, 500))["pulls"].to_pylist() == [10, 3, 3, 2, 2]
