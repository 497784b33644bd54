"""stats_log on a handmade stats.log (tests/spark/data/stats.log).

The fixture follows the format confirmed in apache/rocketmq rocketmq-all-4.9.8:
``StatsItem.printAtMinutes`` -> ``"[%s] [%s] Stats In One Minute, "`` + ``StatsItem.statPrintDetail``
(``"SUM: %d TPS: %.2f AVGPT: %.2f"``) or ``RTStatsItem.statPrintDetail`` (``"TIMES: %d AVGRT: %.2f"``,
GROUP_GET_LATENCY); ``StatsItem.printAtHour`` (skipped); ``MomentStatsItem.printAtMinutes``
(``"Stats Every 5 Minutes, Value: %d"``, skipped); keys from ``BrokerStatsManager.buildStatsKey``
with ``enableDetailStat`` true; the line prefix from distribution/conf/logback_broker.xml
(``%d{yyy-MM-dd HH:mm:ss,GMT+8} %p - %m%n``). It has one blank and one truncated line.
Minutes printed at 10:01, 10:02, 10:03 GMT+8 cover 02:00, 02:01, 02:02 UTC.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

FIXTURE = Path(__file__).resolve().parent / "data" / "stats.log"
W0 = dt.datetime(2024, 5, 14, 2, 0)
W1 = W0 + dt.timedelta(minutes=1)
W2 = W0 + dt.timedelta(minutes=2)


def test_lines_are_classified_and_parsed(spark) -> None:
    from spark_jobs import files, stats_log

    parsed = stats_log.parse_stats_lines(files.read_lines(spark, [str(FIXTURE)]))
    kinds = {(r["kind"], r["reason"]): r["count"] for r in parsed.groupBy("kind", "reason").count().collect()}
    assert kinds == {("minute", None): 59, ("skipped", None): 4, ("rejected", "blank"): 1, ("rejected", "malformed"): 1}
    latency = parsed.where("stat = 'GROUP_GET_LATENCY' and key = '3@TopicTest@cg_test'").orderBy("window_start")
    assert [(r["printed_at"], r["window_start"], r["times"], r["avgrt"], r["sum"]) for r in latency.collect()] == [
        (W1, W0, 96, 2.75, None), (W2, W1, 3, 2.30, None), (W2 + dt.timedelta(minutes=1), W2, 200, 3.40, None),
    ]  # fmt: skip
    nums = parsed.where("stat = 'GROUP_GET_NUMS' and key = 'TopicTest@cg_test'").orderBy("window_start").first()
    assert (nums["sum"], nums["tps"], nums["avgpt"], nums["times"]) == (1200, 20.0, 3.13, None)


def test_minute_table_from_the_fixture(spark) -> None:
    from pyspark.testing import assertDataFrameEqual

    from spark_jobs import files, stats_log

    _, tables = stats_log.transform(files.read_lines(spark, [str(FIXTURE)]))
    columns = ["group", "topic", "window_start", "date", "found_pulls", "msgs", "bytes", "msgs_per_min",
               "service_ms_mean", "service_ms_max_minute"]  # fmt: skip
    actual = tables["by_minute"].select(*columns)
    expected = [
        # found pulls = sum of GROUP_GET_LATENCY TIMES over queues; service = sum(TIMES*AVGRT) / sum(TIMES)
        ("cg_test", "TopicTest", W0, "2024-05-14", 383, 1200, 1536000, 1200.0, (48 + 38 + 48 + 264) / 383, 2.75),
        ("cg_test", "TopicTest", W1, "2024-05-14", 12, 12, 15360, 12.0, (0.9 * 3 + 6.9) / 12, 2.30),
        ("cg_test", "TopicTest", W2, "2024-05-14", 750, 6000, 7680000, 6000.0, (160 + 120 + 90 + 680) / 750, 3.40),
        ("cg_order", "OrderTopic", W0, "2024-05-14", 6, 6, 3072, 6.0, (4 * 0.25 + 2 * 0.5) / 6, 0.5),
        # an idle minute: items print SUM 0 / TIMES 0; no found pulls, so no service time
        ("cg_order", "OrderTopic", W1, "2024-05-14", 0, 0, 0, 0.0, None, 0.0),
    ]  # fmt: skip
    assertDataFrameEqual(actual, spark.createDataFrame(expected, actual.schema), rtol=1e-9)

    queues = tables["slowest_queues"].select("rank", "group", "topic", "queue_id", "found_pulls", "service_ms_mean")
    expected_queues = [
        (1, "cg_test", "TopicTest", 3, 299, (264 + 6.9 + 680) / 299),
        (2, "cg_test", "TopicTest", 0, 299, (48 + 0.9 + 160) / 299),
        (3, "cg_test", "TopicTest", 2, 249, (48 + 0.9 + 90) / 249),
        (4, "cg_test", "TopicTest", 1, 298, (38 + 0.9 + 120) / 298),
        (5, "cg_order", "OrderTopic", 1, 2, 0.5),
        (6, "cg_order", "OrderTopic", 0, 4, 0.25),
    ]
    assertDataFrameEqual(queues, spark.createDataFrame(expected_queues, queues.schema), rtol=1e-9, checkRowOrder=True)

    put = tables["topic_put"].collect()
    assert [(r["topic"], r["put_msgs"], r["put_bytes"]) for r in put] == [
        ("TopicTest", 7212, 9231360), ("OrderTopic", 6, 3072)
    ]  # fmt: skip
    gt = {(r["group"], r["topic"]): r for r in tables["group_topic"].collect()}
    assert (gt["cg_test", "TopicTest"]["found_pulls"], gt["cg_test", "TopicTest"]["msgs"]) == (1145, 7212)
    assert gt["cg_test", "TopicTest"]["msgs_per_min"] == 7212 / 3


def test_pull_count_falls_back_to_sum_over_avgpt_and_zones_and_decimal_commas_are_honoured(spark) -> None:
    from spark_jobs import stats_log

    from .helpers import lines_frame

    lines = [
        # no GROUP_GET_LATENCY (transferMsgByHeap=false): pulls = round(SUM / AVGPT) = round(100 / 3.33) = 30
        "2024-05-14 00:00:00 INFO - [GROUP_GET_NUMS] [T@G] Stats In One Minute, SUM: 100 TPS: 1,67 AVGPT: 3,33",
        "2024-05-14 00:00:00 INFO - [GROUP_GET_NUMS] [T@G] Stats In One Minute, SUM: 100 TPS: n/a AVGPT: 3.33",
        "2024-05-14 00:00:00 WARN - something else entirely",
    ]
    parsed = stats_log.parse_stats_lines(lines_frame(spark, lines), timezone="UTC")
    assert [(r["kind"], r["reason"]) for r in parsed.collect()] == [
        ("minute", None), ("rejected", "bad_numbers"), ("rejected", "malformed")
    ]  # fmt: skip
    (row,) = stats_log.by_minute(stats_log.group_get_minutes(parsed)).collect()
    assert (row["window_start"], row["found_pulls"], row["msgs"], row["service_ms_mean"]) == (
        dt.datetime(2024, 5, 13, 23, 59), 30, 100, None
    )  # fmt: skip


def test_stats_job_writes_tables_and_report(spark, tmp_path) -> None:
    import json

    from spark_jobs import stats_log

    out = tmp_path / "out"
    summary = stats_log.run(spark, [str(FIXTURE)], str(out))
    assert (summary["lines_used"], summary["lines_skipped"], summary["rejected"]) == (59, 4, 2)
    assert json.loads((out / "summary.json").read_text())["rejected_by_reason"] == {"blank": 1, "malformed": 1}
    assert sorted(p.name for p in (out / "by_minute").iterdir() if p.is_dir()) == ["date=2024-05-14"]
    assert (out / "csv" / "by_minute.csv").read_text().splitlines()[0].startswith("group,topic,window_start,date,")
    rejects = [json.loads(x) for p in (out / "rejects").glob("*.json") for x in p.read_text().splitlines()]
    assert sorted(r["reason"] for r in rejects) == ["blank", "malformed"]
    html = (out / "report.html").read_text()
    assert html.count("<figure") == 3 and "GROUP_GET_LATENCY" in html  # charts
