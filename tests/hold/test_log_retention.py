"""The pull event log stays bounded: files roll over by size, and retention deletes by age, by the
byte bound and when the disk fills, with a fake clock and a fake disk."""

from __future__ import annotations

import os
import time
from pathlib import Path

from rmqproxy.core.config import Config
from rmqproxy.observe import rollup
from rmqproxy.observe.log_files import (
    ACTIVE_S,
    AUTO_MAX_BYTES,
    LogFile,
    Roller,
    auto_max_bytes,
    instance_name,
    hour_of,
    log_file_name,
    plan,
    writer_name,
)
from rmqproxy.observe.pull_events import PullEvent, PullLog

HOUR = 3600
GIB = 1 << 30
NOW = 1_700_000_000.0


def files(*specs: tuple[str, int, float]) -> list[LogFile]:
    return [LogFile(Path(name), size, mtime) for name, size, mtime in specs]


def names(decision) -> list[tuple[str, str]]:
    return [(f.path.name, why) for f, why in decision.delete]


def test_files_older_than_the_retention_go_and_nothing_else() -> None:
    log = files(("a", 10, NOW - 80 * HOUR), ("b", 10, NOW - 73 * HOUR), ("c", 10, NOW - 71 * HOUR), ("d", 10, NOW))
    decision = plan(log, NOW, max_age_s=72 * HOUR, max_bytes=GIB, disk_total=100 * GIB, disk_used=GIB)
    assert names(decision) == [("a", "age"), ("b", "age")]
    assert decision.size_after == 20 and not decision.stop_writing


def test_past_the_byte_bound_the_oldest_go_first_but_never_the_file_being_written() -> None:
    log = files(("new", 40, NOW), ("old", 40, NOW - 3 * HOUR), ("mid", 40, NOW - 2 * HOUR), ("cur", 40, NOW - 4 * HOUR))
    decision = plan(log, NOW, max_age_s=72 * HOUR, max_bytes=90, disk_total=100 * GIB, disk_used=GIB,
                    writing=Path("cur"))  # fmt: skip
    assert names(decision) == [("old", "size"), ("mid", "size")]
    assert decision.size_after == 80
    alone = plan(files(("cur", 500, NOW)), NOW, max_age_s=HOUR, max_bytes=10, disk_total=GIB, disk_used=1,
                 writing=Path("cur"))  # fmt: skip
    assert alone.delete == [] and alone.size_after == 500


def test_a_disk_past_85_percent_takes_the_oldest_files_and_stops_writing_if_that_is_not_enough() -> None:
    log = files(("a", 5 * GIB, NOW - 3), ("b", 5 * GIB, NOW - 2), ("c", 5 * GIB, NOW - 1))
    room = plan(log, NOW, max_age_s=72 * HOUR, max_bytes=100 * GIB, disk_total=100 * GIB, disk_used=94 * GIB)
    assert names(room) == [("a", "disk"), ("b", "disk")] and not room.stop_writing  # 84 GiB used after
    small = files(("a", 4 * GIB, NOW - 3), ("b", 4 * GIB, NOW - 2), ("c", 4 * GIB, NOW - 1))
    full = plan(small, NOW, max_age_s=72 * HOUR, max_bytes=100 * GIB, disk_total=100 * GIB, disk_used=99 * GIB)
    assert [why for _, why in full.delete] == ["disk"] * 3 and full.stop_writing and full.size_after == 0


def test_the_automatic_bound_is_ten_gib_or_a_tenth_of_the_disk() -> None:
    assert auto_max_bytes(50 * GIB) == 5 * GIB
    assert auto_max_bytes(500 * GIB) == AUTO_MAX_BYTES == 10 * GIB


def test_files_roll_over_by_size_and_a_restart_goes_on_with_the_last_one(tmp_path: Path) -> None:
    roller = Roller(tmp_path, "10.0.0.1_9876", roll_bytes=100)
    assert roller.current is None
    assert roller.path_for("20231114-22", 60).name == "pulls-20231114-22-10.0.0.1_9876-0.jsonl"
    assert roller.path_for("20231114-22", 40).name.endswith("-0.jsonl")  # exactly the bound: still fits
    assert roller.path_for("20231114-22", 1).name.endswith("-1.jsonl")
    assert roller.path_for("20231114-23", 500).name == "pulls-20231114-23-10.0.0.1_9876-0.jsonl"  # a new hour
    (tmp_path / log_file_name("20231114-22", "10.0.0.1_9876", 1)).write_bytes(b"x" * 90)
    again = Roller(tmp_path, "10.0.0.1_9876", roll_bytes=100)
    assert again.path_for("20231114-22", 5).name.endswith("-1.jsonl")
    assert again.path_for("20231114-22", 6).name.endswith("-2.jsonl")
    assert instance_name("127.0.0.1:10911") == "127.0.0.1_10911" and instance_name("a/b:1") == "a_b_1"


def _event(ts_ms: int) -> PullEvent:
    return PullEvent(ts_ms, ts_ms, "cg", "T", 0, "c@1", "10.0.0.5:1", 0, 32, 15000, False, 0.0, 1.0, 1.0, "none",
                     "long", "PULL_NOT_FOUND", 0, 0, 0, 0)  # fmt: skip


def test_the_writer_applies_retention_by_age_before_it_writes(tmp_path: Path) -> None:
    now = time.time()
    old = [tmp_path / log_file_name(f"20200101-0{i}", "x", 0) for i in range(3)]
    for path in old:
        path.write_bytes(b"{}\n" * 10)
        os.utime(path, (now - 100 * HOUR, now - 100 * HOUR))
    young = tmp_path / log_file_name("20200102-00", "x", 0)
    young.write_bytes(b"{}\n")
    log = PullLog(tmp_path, instance="x", retention_hours=72, max_bytes=GIB, disk=lambda _p: (100 * GIB, GIB))
    log(_event(int(now * 1000)))
    log.close()
    assert not any(p.exists() for p in old) and young.exists()
    assert log.deleted["age"] == 3 and log.deleted_bytes == 90 and log.written == 1
    written = tmp_path / log_file_name(time.strftime("%Y%m%d-%H", time.gmtime(now)), "x", 0)
    assert log.bytes == young.stat().st_size + written.stat().st_size


def test_a_full_disk_stops_the_log_and_its_events_are_counted_as_dropped(tmp_path: Path) -> None:
    log = PullLog(tmp_path, instance="x", max_bytes=GIB, disk=lambda _p: (100 * GIB, 99 * GIB))
    for i in range(5):
        log(_event(1_700_000_000_000 + i))
    log.close()
    assert log.paused and (log.dropped, log.written) == (5, 0) and list(tmp_path.iterdir()) == []


def test_with_room_again_the_log_writes_again(tmp_path: Path) -> None:
    disk = [(100 * GIB, 99 * GIB)]
    clock = [NOW]
    log = PullLog(tmp_path, mode="off", instance="x", max_bytes=GIB, disk=lambda _p: disk[0], clock=lambda: clock[0])
    assert log.enforce().stop_writing and log.paused
    disk[0] = (100 * GIB, 50 * GIB)
    assert not log.enforce().stop_writing and not log.paused


def test_retention_keys_reach_the_log_and_its_bound_is_exported(servers, tmp_path: Path) -> None:
    server, _reactor = servers(tmp_path, pull_log_retention_hours=5, pull_log_max_bytes=123_456_789)
    assert server.pull_log.max_age_s == 5 * HOUR and server.pull_log.max_bytes == 123_456_789
    assert server.registry.get_sample_value("rmqproxy_pull_log_max_bytes") == 123_456_789
    server.pull_log.deleted["size"] += 2
    assert server.registry.get_sample_value("rmqproxy_pull_log_deleted_files_total", {"reason": "size"}) == 2
    assert server.registry.get_sample_value("rmqproxy_pull_log_paused") == 0


def test_a_keeper_leaves_every_file_written_in_the_last_minute() -> None:
    log = files(("idle", 40, NOW - ACTIVE_S - 1), ("w1", 40, NOW - ACTIVE_S + 1), ("w2", 40, NOW), ("ahead", 40, NOW + 5))
    kept = plan(log, NOW, max_age_s=72 * HOUR, max_bytes=0, disk_total=100 * GIB, disk_used=GIB, active_s=ACTIVE_S)
    assert names(kept) == [("idle", "size"), ("ahead", "size")]  # a file from a clock stepped back is not active
    assert kept.size_after == 80
    full = plan(log, NOW, max_age_s=72 * HOUR, max_bytes=GIB, disk_total=100 * GIB, disk_used=99 * GIB,
                active_s=ACTIVE_S)  # fmt: skip
    assert names(full) == [("idle", "disk"), ("ahead", "disk")] and full.stop_writing
    assert len(plan(log, NOW, max_age_s=72 * HOUR, max_bytes=0, disk_total=100 * GIB, disk_used=GIB).delete) == 4


def test_a_workers_files_have_a_name_of_their_own_and_its_restart_goes_on_with_only_them(tmp_path: Path) -> None:
    assert writer_name("10.0.0.1:9876") == "10.0.0.1_9876" and writer_name("10.0.0.1:9876", 1) == "10.0.0.1_9876.w1"
    hour = "20231114-22"
    for name, size in (("10.0.0.1_9876", 90), ("10.0.0.1_9876.w1", 50), ("10.0.0.1_9876.w10", 70)):
        for number in range(3 if name.endswith("w10") else 2 if name.endswith("w1") else 1):
            (tmp_path / log_file_name(hour, name, number)).write_bytes(b"x" * size)
    single, first, tenth = (Roller(tmp_path, name, roll_bytes=100) for name in
                            ("10.0.0.1_9876", "10.0.0.1_9876.w1", "10.0.0.1_9876.w10"))  # fmt: skip
    assert single.path_for(hour, 5).name == "pulls-20231114-22-10.0.0.1_9876-0.jsonl"
    assert first.path_for(hour, 5).name == "pulls-20231114-22-10.0.0.1_9876.w1-1.jsonl"
    assert first.path_for(hour, 50).name == "pulls-20231114-22-10.0.0.1_9876.w1-2.jsonl"  # its own size: 55 + 50
    assert tenth.path_for(hour, 5).name == "pulls-20231114-22-10.0.0.1_9876.w10-2.jsonl"
    fresh = Roller(tmp_path, "10.0.0.1_9876.w2")
    assert fresh.path_for(hour, 5).name == "pulls-20231114-22-10.0.0.1_9876.w2-0.jsonl"


def _config(tmp_path: Path, **values) -> Config:
    return Config(pull_log_path=str(tmp_path), broker_ip1="10.0.0.1", listen_port=9876, pull_log_max_bytes=GIB, **values)


def test_a_worker_writes_its_own_files_deletes_nothing_and_never_compacts(tmp_path: Path) -> None:
    clock = [NOW]
    old = tmp_path / log_file_name("20200101-00", "10.0.0.1_9876.w2", 0)
    old.write_bytes(b"{}\n" * 10)
    os.utime(old, (NOW - 100 * HOUR, NOW - 100 * HOUR))
    log = PullLog.of(_config(tmp_path), worker=1)
    assert (log.role, log.compact) == ("writer", None)  # pullLogCompact is on: the keeper's job
    log.close()
    log = PullLog(tmp_path, instance="10.0.0.1:9876", worker=1, role="writer", max_bytes=1, retention_hours=1,
                  clock=lambda: clock[0], disk=lambda _p: (100 * GIB, GIB))  # fmt: skip
    log(_event(int(NOW * 1000)))
    log.close()
    decision = log.enforce()
    assert names(decision) == [(old.name, "age")] and old.exists()  # the keeper's to delete; its own one is written
    assert log.deleted_bytes == 0 and sum(log.deleted.values()) == 0
    mine = tmp_path / log_file_name(hour_of(int(NOW * 1000)), "10.0.0.1_9876.w1", 0)
    assert mine.exists() and log.written == 1 and log.bytes == 30 + mine.stat().st_size


def test_a_worker_stops_writing_only_while_the_keeper_could_not_make_room(tmp_path: Path) -> None:
    clock = [NOW]
    other = tmp_path / log_file_name("20231114-21", "10.0.0.1_9876.w2", 0)
    other.write_bytes(b"x" * 20)
    os.utime(other, (NOW - 1, NOW - 1))  # another worker's, written a second ago
    log = PullLog(tmp_path, mode="off", instance="10.0.0.1:9876", worker=1, role="writer", max_bytes=GIB,
                  disk=lambda _p: (1000, 860), clock=lambda: clock[0])  # fmt: skip
    assert log.enforce().stop_writing and log.paused and other.exists()
    clock[0] = NOW + ACTIVE_S  # idle for a minute: the keeper may take it, so write on
    assert not log.enforce().stop_writing and not log.paused and other.exists()
    paused = PullLog(tmp_path / "full", instance="10.0.0.1:9876", worker=1, role="writer", max_bytes=GIB,
                     disk=lambda _p: (100 * GIB, 99 * GIB))  # fmt: skip
    for i in range(3):
        paused(_event(1_700_000_000_000 + i))
    paused.close()
    assert paused.paused and (paused.dropped, paused.written) == (3, 0)


def test_the_keeper_bounds_every_workers_files_together_but_leaves_those_being_written(tmp_path: Path) -> None:
    clock = [NOW]
    sizes = {"10.0.0.1_9876.w1": (400, NOW - 3 * HOUR), "10.0.0.1_9876.w2": (400, NOW - 2 * HOUR),
             "10.0.0.1_9876.w3": (400, NOW - 30)}  # fmt: skip
    paths = {}
    for name, (size, mtime) in sizes.items():
        paths[name] = tmp_path / log_file_name("20231114-21", name, 0)
        paths[name].write_bytes(b"x" * size)
        os.utime(paths[name], (mtime, mtime))
    keeper = PullLog(tmp_path, mode="off", instance="10.0.0.1:9876", role="keeper", max_bytes=500,
                     disk=lambda _p: (100 * GIB, GIB), clock=lambda: clock[0])  # fmt: skip
    assert names(keeper.enforce()) == [(paths["10.0.0.1_9876.w1"].name, "size"), (paths["10.0.0.1_9876.w2"].name, "size")]
    assert [p.exists() for p in paths.values()] == [False, False, True]  # 400 bytes left of the 500: one total
    assert keeper.deleted["size"] == 2 and keeper.bytes == 400
    assert PullLog.keeper_of(_config(tmp_path, pull_log_mode="off")).role == "keeper"


def test_the_keeper_logs_no_event_and_compacts(tmp_path: Path) -> None:
    keeper = PullLog(tmp_path, instance="10.0.0.1:9876", role="keeper", max_bytes=GIB, check_every_s=3600,
                     compact=rollup.Options(), disk=lambda _p: (100 * GIB, GIB))  # fmt: skip
    keeper(_event(int(NOW * 1000)))
    keeper.flush()
    keeper.close()
    assert keeper.written == 0 and list(tmp_path.iterdir()) == [] and keeper.compact == rollup.Options()
