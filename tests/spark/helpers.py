"""Handmade pull events for the Spark tests."""

from __future__ import annotations

import dataclasses
import json

from rmqproxy.observe.pull_events import PullEvent

#: 2024-05-13 20:00:00 UTC
T0 = 1_715_630_400_000
MINUTE = 60_000


def event(**fields) -> dict:
    """A PullEvent as a dict: a quick FOUND pull of g1/t1 queue 0 at T0, overridden by ``fields``."""
    base = {
        "ts_ms": T0, "arrived_ms": T0, "group": "g1", "topic": "t1", "queue_id": 0, "client_id": "10.0.0.1@1",
        "remote": "10.0.0.1:5000", "offset": 0, "max_msgs": 32, "suspend_ms": 15000, "held": False, "hold_ms": 0.0,
        "service_ms": 0.5, "total_ms": 0.5, "wake": "none", "mode": "long", "code": "SUCCESS", "msgs": 1,
        "bytes": 100, "next_offset": 1, "max_offset": 1,
    }  # fmt: skip
    base.update(fields)
    return dataclasses.asdict(PullEvent(**base))


def line(e: dict) -> str:
    """The JSONL line the server's PullLog writes for ``e``."""
    return PullEvent(**e).to_json()


def events_frame(spark, events: list[dict]):
    from spark_jobs.schema import PULL_EVENT

    return spark.createDataFrame([tuple(e[f.name] for f in PULL_EVENT.fields) for e in events], PULL_EVENT)


def lines_frame(spark, lines: list[str], source: str = "test.jsonl"):
    return spark.createDataFrame([(x, source) for x in lines], "value string, source string")


def dumps(e: dict) -> str:
    return json.dumps(e, separators=(",", ":"))
