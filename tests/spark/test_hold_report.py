"""hold_report end to end on generated logs: what it writes, and that nothing is lost."""

from __future__ import annotations

import gzip
import json
from collections import Counter

from spark_jobs import generate, schema

MIDNIGHT_MS = 1_715_644_800_000  # 2024-05-14 00:00:00 UTC


def test_job_writes_parquet_by_date_csv_rejects_summary_and_report(spark, tmp_path) -> None:
    from spark_jobs import hold_report

    logs = tmp_path / "logs"
    paths = generate.write(logs, 6_000, seed=9, gzip=True, start_ms=MIDNIGHT_MS - 90_000)
    (logs / "pulls-20240514-00.partial.jsonl").write_text('{"ts_ms":1715644800001,"arrived_ms"\n\n')
    raw = [json.loads(x) for p in paths for x in gzip.decompress(p.read_bytes()).decode().splitlines()]
    out = tmp_path / "out"

    summary = hold_report.run(spark, [str(logs)], str(out), sketch_k=1000, min_pulls=1, top=5)

    assert (summary["lines"], summary["events"], summary["rejected"]) == (6_002, 6_000, 2)
    assert summary["rejected_by_reason"] == {"blank": 1, "malformed": 1}
    assert summary["first_ts_ms"] == min(e["ts_ms"] for e in raw)
    assert json.loads((out / "summary.json").read_text())["events"] == 6_000
    for table in ("by_minute", "by_hour"):
        assert sorted(p.name for p in (out / table).iterdir() if p.is_dir()) == ["date=2024-05-13", "date=2024-05-14"]
    by_minute = spark.read.parquet(str(out / "by_minute"))
    totals = by_minute.groupBy().sum("pulls", "msgs", "bytes", "timeouts").first()
    assert tuple(totals) == (
        len(raw), sum(e["msgs"] for e in raw), sum(e["bytes"] for e in raw), sum(e["wake"] == "timeout" for e in raw)
    )  # fmt: skip
    per_group = Counter((e["group"], e["topic"]) for e in raw)
    group_topic = spark.read.parquet(str(out / "group_topic")).collect()
    assert {(r["group"], r["topic"]): r["pulls"] for r in group_topic} == per_group
    for name in hold_report.TABLES:
        csv_lines = (out / "csv" / f"{name}.csv").read_text().splitlines()
        assert len(csv_lines) == summary["tables"][name] + 1, name
    assert len(spark.read.parquet(str(out / "slowest_queues")).collect()) == 5
    rejects = [json.loads(x) for p in (out / "rejects").glob("*.json") for x in p.read_text().splitlines()]
    assert sorted((r["reason"], r["line"]) for r in rejects) == [
        ("blank", ""), ("malformed", '{"ts_ms":1715644800001,"arrived_ms"')
    ]  # fmt: skip
    html = (out / "report.html").read_text()
    assert html.count("<figure") == 7  # one per chart (the time chart has a panel per group/topic)
    assert "Arrival rate vs pull time" in html and "<script" not in html and "http" not in html.split("<body>")[1]


def test_empty_input_gives_empty_tables_and_says_so(spark, tmp_path) -> None:
    from spark_jobs import hold_report

    (tmp_path / "pulls-20240513-20.jsonl").write_text("")
    out = tmp_path / "out"
    summary = hold_report.run(spark, [str(tmp_path / "pulls-*.jsonl")], str(out))
    assert (summary["lines"], summary["events"], summary["rejected"], summary["first_ts_ms"]) == (0, 0, 0, None)
    assert set(summary["tables"].values()) == {0}
    assert (out / "csv" / "group_topic.csv").read_text().startswith("group,topic,pulls,")
    assert "No events" in (out / "report.html").read_text()


def test_events_can_be_kept_as_parquet_by_date(spark, tmp_path) -> None:
    from spark_jobs import hold_report

    logs = tmp_path / "logs"
    generate.write(logs, 300, seed=1, start_ms=MIDNIGHT_MS - 1_000)
    out = tmp_path / "out"
    hold_report.run(spark, [str(logs)], str(out), events_parquet=True)
    events = spark.read.parquet(str(out / "events"))
    assert events.count() == 300
    assert {str(r["date"]) for r in events.select("date").distinct().collect()} == {"2024-05-13", "2024-05-14"}
    assert set(events.columns) >= {"ts_ms", "arrived_ms", "offset", "next_offset", "max_offset", "overshoot_ms"}
    # a clean log still gets its rejects output, empty, with the reject columns
    rejects = spark.read.json(str(out / "rejects"), schema=schema.REJECT)
    assert rejects.count() == 0
    assert (out / "rejects" / "_SUCCESS").exists()
