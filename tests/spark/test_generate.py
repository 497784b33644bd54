"""The event generator: deterministic, PullEvent-exact, and shaped like the server's behaviour."""

from __future__ import annotations

import dataclasses
import gzip
import json
import typing
from collections import Counter

import pytest

from rmqproxy.observe.log_files import hour_of, log_file_name
from rmqproxy.observe.pull_events import PullEvent
from spark_jobs import generate

FIELDS = [f.name for f in dataclasses.fields(PullEvent)]
TYPES = {f.name: typing.get_type_hints(PullEvent)[f.name] for f in dataclasses.fields(PullEvent)}


@pytest.fixture(scope="module")
def sample() -> list[dict]:
    return [json.loads(x) for _, x in generate.events(30_000, seed=11, shutdown=True)]


def test_same_seed_same_lines_other_seed_other_lines() -> None:
    first = list(generate.events(2_000, seed=3))
    assert first == list(generate.events(2_000, seed=3))
    assert first != list(generate.events(2_000, seed=4))
    assert len(first) == 2_000


def test_every_line_is_a_pull_event_with_its_fields_in_order_and_types(sample) -> None:
    for e in sample:
        assert list(e) == FIELDS
        for name, value in e.items():
            assert type(value) is TYPES[name], (name, value)
        PullEvent(**e)


def test_behaviour_mirrors_the_server(sample) -> None:
    wakes = Counter(e["wake"] for e in sample)
    assert set(wakes) == {"none", "arrival", "timeout", "disconnect", "shutdown"}
    assert len({e["group"] for e in sample}) >= 5
    assert {e["suspend_ms"] for e in sample} == {0, 15_000, 20_000}
    for e in sample:
        assert e["ts_ms"] >= e["arrived_ms"]
        assert abs(e["total_ms"] - e["hold_ms"] - e["service_ms"]) <= 0.002
        assert e["held"] == (e["wake"] not in ("none",))
        if e["wake"] == "timeout":
            assert e["suspend_ms"] <= e["hold_ms"] <= e["suspend_ms"] + 2.0
        if e["wake"] == "arrival":
            assert 0 <= e["hold_ms"] < e["suspend_ms"] and e["code"] == "SUCCESS" and e["msgs"] >= 1
        if e["wake"] == "none" and e["code"] == "SUCCESS":
            assert 0 < e["service_ms"] < 50 and e["msgs"] >= 1 and e["next_offset"] == e["offset"] + e["msgs"]
        if e["code"] == "PULL_NOT_FOUND":
            assert e["msgs"] == 0 and e["bytes"] == 0 and e["next_offset"] == e["offset"]
        if e["suspend_ms"] == 0:
            assert not e["held"]
    services = sorted(e["service_ms"] for e in sample if not e["held"])
    assert services[len(services) // 2] < 1.0 < services[-1]  # a fraction of a ms, with a slow tail
    ts = [e["ts_ms"] for e in sample if e["wake"] != "shutdown"]
    assert ts == sorted(ts)


def test_short_mode_holds_to_the_short_polling_time() -> None:
    timeouts = [json.loads(x) for _, x in generate.events(3_000, seed=5, mode="short", short_polling_ms=1000)]
    timeouts = [e for e in timeouts if e["wake"] == "timeout"]
    assert timeouts and all(e["mode"] == "short" and 1000 <= e["hold_ms"] <= 1002 for e in timeouts)


def test_written_files_are_hourly_like_the_servers_and_gzip_reads_back(tmp_path) -> None:
    paths = generate.write(tmp_path, 5_000, seed=2, gzip=True, start_ms=generate.DEFAULT_START_MS - 20_000)
    assert [p.name for p in paths] == ["pulls-20240513-19-generated_10911-0.jsonl.gz", "pulls-20240513-20-generated_10911-0.jsonl.gz"]
    by_file = {p.name: gzip.decompress(p.read_bytes()).decode().splitlines() for p in paths}
    assert sum(len(lines) for lines in by_file.values()) == 5_000
    for name, lines in by_file.items():
        assert {log_file_name(hour_of(json.loads(x)["ts_ms"]), "generated_10911") + ".gz" for x in lines} == {name}
