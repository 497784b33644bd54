"""Aggregates on handmade events, expected values worked out by hand (a KLL percentile is an actual
value: with at most k values it is the value of rank ceil(p * n))."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from .helpers import MINUTE, T0, event, events_frame

M0 = dt.datetime(2024, 5, 13, 20, 0)
M1 = M0 + dt.timedelta(minutes=1)


def _events() -> list[dict]:
    held = {"held": True, "code": "PULL_NOT_FOUND", "msgs": 0, "bytes": 0}
    return [
        # g1/t1, minute 20:00
        event(ts_ms=T0 + 1_000, held=True, hold_ms=100.0, service_ms=0.5, total_ms=100.5, wake="arrival", msgs=2,
              bytes=400),
        event(ts_ms=T0 + 20_000, hold_ms=15001.5, service_ms=0.2, total_ms=15001.7, wake="timeout", **held),
        event(ts_ms=T0 + 30_000, service_ms=1.0, total_ms=1.0, msgs=32, bytes=6400),
        event(ts_ms=T0 + 40_000, hold_ms=3000.0, service_ms=0.3, total_ms=3000.3, wake="disconnect",
              **dict(held, code="NO_RESPONSE")),
        # g1/t1, minute 20:01
        event(ts_ms=T0 + MINUTE + 10_000, hold_ms=15000.5, service_ms=0.5, total_ms=15001.0, wake="timeout", **held),
        event(ts_ms=T0 + MINUTE + 20_000, queue_id=1, client_id="", remote="10.0.0.9:6000", service_ms=3.0,
              total_ms=3.0, msgs=1, bytes=100),
        # g2/t1 in short polling mode, minute 20:00
        event(ts_ms=T0 + 5_000, group="g2", client_id="10.0.0.2@2", mode="short", hold_ms=1000.75, service_ms=0.25,
              total_ms=1001.0, wake="timeout", **held),
        event(ts_ms=T0 + 6_000, group="g2", client_id="10.0.0.2@2", mode="short", suspend_ms=0, service_ms=0.1,
              total_ms=0.1, wake="weird", code="PULL_NOT_FOUND", msgs=0, bytes=0),
    ]  # fmt: skip


def _cells(spark, rows: list[dict], **enrich_options):
    from spark_jobs import transforms

    return transforms.cell_stats(transforms.enrich(events_frame(spark, rows), **enrich_options))


@pytest.fixture(scope="module")
def cells(spark):
    return _cells(spark, _events(), short_polling_ms=1000).cache()


COLUMNS = [
    "group", "topic", "window_start", "date", "pulls", "held_pulls", "held_share", "found_pulls",
    "total_ms_p50", "total_ms_p90", "total_ms_p99", "total_ms_max",
    "hold_ms_p50", "hold_ms_p90", "hold_ms_p99", "hold_ms_max",
    "service_ms_p50", "service_ms_p90", "service_ms_p99", "service_ms_max",
    "total_ms_mean", "service_ms_mean", "hold_share_of_time",
    "wake_none_share", "wake_arrival_share", "wake_timeout_share", "wake_disconnect_share", "wake_shutdown_share",
    "wake_other_share", "timeouts", "overshoot_ms_p50", "overshoot_ms_p99", "overshoot_ms_max", "overshoot_ms_mean",
    "msgs", "bytes", "msgs_per_min",
]  # fmt: skip


def test_minute_window_aggregates(spark, cells) -> None:
    from pyspark.testing import assertDataFrameEqual

    from spark_jobs import transforms

    actual = transforms.window_stats(cells, "minute").select(*COLUMNS)
    expected = [
        # totals sorted 1.0 100.5 3000.3 15001.7; holds 100 3000 15001.5; services 0.2 0.3 0.5 1.0
        ("g1", "t1", M0, "2024-05-13", 4, 3, 0.75, 2,
         100.5, 15001.7, 15001.7, 15001.7,
         3000.0, 15001.5, 15001.5, 15001.5,
         0.3, 1.0, 1.0, 1.0,
         18103.5 / 4, 2.0 / 4, 18101.5 / 18103.5,
         0.25, 0.25, 0.25, 0.25, 0.0, 0.0, 1, 1.5, 1.5, 1.5, 1.5,
         34, 6800, 34.0),
        ("g1", "t1", M1, "2024-05-13", 2, 1, 0.5, 1,
         3.0, 15001.0, 15001.0, 15001.0,
         15000.5, 15000.5, 15000.5, 15000.5,
         0.5, 3.0, 3.0, 3.0,
         15004.0 / 2, 3.5 / 2, 15000.5 / 15004.0,
         0.5, 0.0, 0.5, 0.0, 0.0, 0.0, 1, 0.5, 0.5, 0.5, 0.5,
         1, 100, 1.0),
        # short mode: overshoot against short_polling_ms (1000), not suspend_ms; "weird" wakes count as other
        ("g2", "t1", M0, "2024-05-13", 2, 1, 0.5, 0,
         0.1, 1001.0, 1001.0, 1001.0,
         1000.75, 1000.75, 1000.75, 1000.75,
         0.1, 0.25, 0.25, 0.25,
         1001.1 / 2, 0.35 / 2, 1000.75 / 1001.1,
         0.0, 0.0, 0.5, 0.0, 0.0, 0.5, 1, 0.75, 0.75, 0.75, 0.75,
         0, 0, 0.0),
    ]  # fmt: skip
    assertDataFrameEqual(actual, spark.createDataFrame(expected, actual.schema), rtol=1e-9)


def test_hour_window_and_whole_input_aggregates(spark, cells) -> None:
    from pyspark.testing import assertDataFrameEqual

    from spark_jobs import transforms

    columns = ["group", "topic", "pulls", "total_ms_p50", "total_ms_p90", "hold_ms_p50", "hold_ms_p90",
               "service_ms_p50", "service_ms_p90", "overshoot_ms_p50", "overshoot_ms_p99", "overshoot_ms_mean",
               "timeouts", "msgs", "msgs_per_min"]  # fmt: skip
    hour = transforms.window_stats(cells, "hour")
    assert [(r["window_start"], r["date"]) for r in hour.collect()] == [(M0, "2024-05-13")] * 2
    # g1 totals 1.0 3.0 100.5 3000.3 15001.0 15001.7; holds 100 3000 15000.5 15001.5;
    # services 0.2 0.3 0.5 0.5 1.0 3.0; overshoots 0.5 1.5. 35 messages over 60 min.
    expected_hour = [
        ("g1", "t1", 6, 100.5, 15001.7, 3000.0, 15001.5, 0.5, 3.0, 0.5, 1.5, 1.0, 2, 35, 35 / 60),
        ("g2", "t1", 2, 0.1, 1001.0, 1000.75, 1000.75, 0.1, 0.25, 0.75, 0.75, 0.75, 1, 0, 0.0),
    ]
    actual = hour.select(*columns)
    assertDataFrameEqual(actual, spark.createDataFrame(expected_hour, actual.schema), rtol=1e-9)
    # whole input: the same numbers, the rate over the span first to last answer (g1: 79 s; g2: 1 s -> 1 min)
    expected_all = [row[:-1] + (35 / (79_000 / 60_000),) for row in expected_hour[:1]] + [expected_hour[1]]
    for window in ("hour", "minute"):  # merged from either window size
        actual = transforms.group_topic_stats(transforms.window_cells(cells, window)).select(*columns)
        assertDataFrameEqual(actual, spark.createDataFrame(expected_all, actual.schema), rtol=1e-9)


def test_timeout_overshoot_is_against_suspend_in_long_mode_and_short_polling_in_short(spark) -> None:
    from spark_jobs import transforms

    rows = [
        event(wake="timeout", held=True, hold_ms=15001.25, suspend_ms=15000),
        event(wake="timeout", held=True, hold_ms=20000.5, suspend_ms=20000),
        event(wake="timeout", held=True, hold_ms=1000.5, suspend_ms=15000, mode="short"),
        event(wake="timeout", held=True, hold_ms=15000.0, suspend_ms=15000, mode="sideways"),
        event(wake="arrival", held=True, hold_ms=10.0),
    ]
    out = transforms.enrich(events_frame(spark, rows), short_polling_ms=900).select("overshoot_ms").collect()
    assert [r["overshoot_ms"] for r in out] == [1.25, 0.5, 100.5, None, None]


def test_percentiles_match_numpy_within_the_kll_rank_error(spark) -> None:
    from spark_jobs import transforms
    from spark_jobs.defaults import DEFAULT_SKETCH_K, rank_error

    rng = np.random.default_rng(20240513)
    values = np.round(rng.lognormal(mean=-1.0, sigma=1.2, size=2000), 3)
    # 1.8 s apart: one hour of 60 minute cells, so the hour's sketch is a merge of 60
    rows = [event(ts_ms=T0 + 1800 * i, service_ms=float(v), total_ms=float(v)) for i, v in enumerate(values)]
    enriched = transforms.enrich(events_frame(spark, rows))
    ordered = np.sort(values)
    n = len(values)
    for k in (50, DEFAULT_SKETCH_K, 4096):
        (row,) = transforms.window_stats(transforms.cell_stats(enriched, sketch_k=k), "hour").collect()
        assert row["pulls"] == n
        for p, name in ((0.5, "p50"), (0.9, "p90"), (0.99, "p99")):
            got = row[f"service_ms_{name}"]
            ranks = np.flatnonzero(ordered == got) + 1  # 1-based ranks holding that value
            assert ranks.size, (k, name, got)
            # the bound holds with 99% confidence; twice it (about five sigma) keeps the test from flaking
            assert np.min(np.abs(ranks - p * n)) <= 2 * rank_error(k) * n + 1, (k, name, got, p * n)
            if k >= n:
                assert got == np.quantile(values, p, method="inverted_cdf"), (name, got)
        assert row["service_ms_max"] == ordered[-1]


def test_rate_buckets_relate_arrival_rate_to_pull_time(spark) -> None:
    from pyspark.testing import assertDataFrameEqual

    from spark_jobs import transforms

    rows = _events()
    minutes = spark.createDataFrame(
        [("g1", "t1", M0, 34, 34.0), ("g1", "t1", M1, 1, 1.0), ("g2", "t1", M0, 0, 0.0)],
        "group string, topic string, window_start timestamp, msgs long, msgs_per_min double",
    )
    out = transforms.rate_vs_pull_time(_cells(spark, rows), minutes)
    columns = ["bucket_index", "bucket", "group_topic_minutes", "pulls", "held_share", "total_ms_p50",
               "service_ms_p50", "msgs_per_min"]  # fmt: skip
    # suspendable pulls only: g2's plain poll (suspend_ms 0) is left out of bucket "0"
    expected = [
        (0, "0", 1, 1, 1.0, 1001.0, 0.25, 0.0),
        (1, "<10", 1, 2, 0.5, 3.0, 0.5, 1.0),
        (2, "10-99", 1, 4, 0.75, 100.5, 0.3, 34.0),
    ]
    actual = out.select(*columns)
    assertDataFrameEqual(actual, spark.createDataFrame(expected, actual.schema), checkRowOrder=True)


def test_slowest_queues_and_clients_rank_by_service_time(spark, cells) -> None:
    from spark_jobs import transforms

    queues = transforms.slowest_queues(cells, top=10, min_pulls=1)
    assert [(r["rank"], r["group"], r["queue_id"], r["pulls"], r["service_ms_p99"]) for r in queues.collect()] == [
        (1, "g1", 1, 1, 3.0), (2, "g1", 0, 5, 1.0), (3, "g2", 0, 2, 0.25),
    ]  # fmt: skip
    busy = transforms.slowest_queues(cells, top=1, min_pulls=2)
    assert [(r["rank"], r["group"], r["queue_id"]) for r in busy.collect()] == [(1, "g1", 0)]
    clients = transforms.slowest_clients(cells, top=10, min_pulls=1)
    assert [(r["rank"], r["client"], r["groups"], r["pulls"], r["service_ms_max"]) for r in clients.collect()] == [
        (1, "10.0.0.9:6000", "g1", 1, 3.0), (2, "10.0.0.1@1", "g1", 5, 1.0), (3, "10.0.0.2@2", "g2", 2, 0.25),
    ]  # fmt: skip
