"""A report over a compacted event log is the report over its JSON lines: the same summary and
the same tables (percentiles exact, see ``_report``), whether every file or some of them has
been compacted, read from their rollups or their rows, a crash between a compaction's rename
and its delete included."""

from __future__ import annotations

import shutil
import time

import csv
import io
import json

import pytest

from rmqproxy.observe import rollup
from rmqproxy.observe.compaction import compact, compact_file, dataset_files, twin
from rmqproxy.observe.pull_events import PullEvent, PullLog
from spark_jobs import files, generate

from .helpers import event

MIDNIGHT_MS = 1_715_644_800_000  # 2024-05-14 00:00:00 UTC
#: The report's options in ``_report``: rollups made for them stand for their files' rows.
EXACT = rollup.Options(sketch_k=65_535)
TORN = b'{"ts_ms":1715644800001,"arrived_ms"\n'
WRONG = b'{"ts_ms":"late"}\n'


def _report(spark, logs, out, engine: str = "spark") -> tuple[dict, dict[str, str]]:
    """The summary (less what differs by run) and CSV tables of a report; ``engine`` "merge" runs
    it as the command does, and checks it merged rollups in the process."""
    from spark_jobs import hold_report

    # A sketch larger than any cell keeps every value, so the percentiles are exact: equal whatever
    # the partitioning (with a smaller one they differ within its rank error, by read order).
    if engine == "spark":
        summary = hold_report.run(spark, [str(logs)], str(out), sketch_k=EXACT.sketch_k, min_pulls=1, top=5)
    else:
        hold_report.main(["-i", str(logs), "-o", str(out), "--sketch-k", str(EXACT.sketch_k), "--min-pulls", "1",
                          "--top", "5", "--engine", engine])  # fmt: skip
        summary = json.loads((out / "summary.json").read_text())
    assert summary.pop("engine") == engine
    kept = {k: v for k, v in summary.items() if k not in ("inputs", "output", "seconds")}
    tables = {p.name: p.read_text() for p in sorted((out / "csv").glob("*.csv"))}
    return kept, tables


def test_the_report_is_the_same_from_json_lines_compacted_and_half_compacted_logs(spark, tmp_path) -> None:
    logs = tmp_path / "json"
    paths = [path for hour in (3, 2, 1) for path in generate.write(
        logs, 8_000 // 3 + (hour == 1) * (8_000 % 3), seed=hour, start_ms=MIDNIGHT_MS - hour * 3_600_000)]  # fmt: skip
    assert len(paths) == 3  # one file an hour
    clean = tmp_path / "clean"  # no rejected lines: every compacted file is its rollup, so it merges without Spark
    shutil.copytree(logs, clean)
    with paths[0].open("ab") as f:
        f.write(TORN + WRONG + b"\n")
    compacted, half = tmp_path / "compacted", tmp_path / "half"
    shutil.copytree(logs, compacted)
    shutil.copytree(logs, half)
    for folder in (compacted, clean):
        assert len(compact(folder, now=time.time() + 86_400, cells=EXACT)) == 3
    compact_file(half / paths[0].name, cells=EXACT)
    compact_file(half / paths[1].name)  # its rollup is for other options: the report reads its rows
    shutil.copy(logs / paths[1].name, half / paths[1].name)  # as a crash between the rename and the delete leaves it
    expected = _report(spark, logs, tmp_path / "out-json")
    assert expected[0]["events"] == 8_000 and expected[0]["rejected"] == 3
    # the same events without the rejected lines: the same tables
    clean_expected = ({**expected[0], "lines": 8_000, "rejected": 0, "rejected_by_reason": {}}, expected[1])
    cases = ((compacted, 3, "spark", expected), (half, 1, "spark", expected), (clean, 3, "merge", clean_expected))
    for folder, rolled, engine, (expected_summary, expected_tables) in cases:
        assert dataset_files(folder)[1], folder
        assert len(files.event_dataset(files.hadoop_listing(spark), [str(folder)], EXACT).cells) == rolled
        summary, tables = _report(spark, folder, tmp_path / f"out-{folder.name}-{engine}", engine)
        assert summary == expected_summary, (folder, engine)
        assert tables.keys() == expected_tables.keys()
        for name, text in tables.items():
            _same_table(text, expected_tables[name], f"{folder.name}/{name} ({engine})")
    _same_parquet(spark, tmp_path / "out-clean-merge", tmp_path / "out-json")
    events = _events_written(spark, compacted, tmp_path / "out-events")
    assert events == 8_000  # --events-parquet writes the rows of rolled files too
    assert twin(half / paths[1].name).exists() and (half / paths[1].name).exists()
    assert not (half / paths[0].name).exists() and (half / paths[2].name).exists()


def test_the_files_of_several_workers_are_one_dataset_compacted_or_not(spark, tmp_path) -> None:
    """Two workers of one proxy write one folder over two hours; the keeper compacts the first
    hour's files (each closed by its own worker's later file): a report counts every event once."""
    from spark_jobs import hold_report

    logs = tmp_path / "logs"
    writers = [PullLog(logs, instance="10.0.0.1:9876", role="writer", worker=slot, max_bytes=1 << 30,
                       disk=lambda _p: (100 << 30, 1 << 30)) for slot in (1, 2)]  # fmt: skip
    for i in range(400):
        ts = MIDNIGHT_MS + (i // 200) * 3_600_000 + i
        writers[i % 2](PullEvent(**event(ts_ms=ts, arrived_ms=ts - 1, offset=i)))
    for writer in writers:
        writer.close()
    assert len(list(logs.glob("pulls-*-10.0.0.1_9876.w[12]-0.jsonl"))) == 4  # two hours, two workers
    assert len(compact(logs, now=MIDNIGHT_MS / 1000 + 1800, cells=EXACT)) == 2
    assert [len(found) for found in dataset_files(logs)] == [2, 2]
    summary = hold_report.run(spark, [str(logs)], str(tmp_path / "out"), sketch_k=EXACT.sketch_k, events_parquet=True)
    assert (summary["events"], summary["rejected"]) == (400, 0)
    rows = spark.read.parquet(str(tmp_path / "out" / "events")).select("offset", "instance").collect()
    assert sorted(r["offset"] for r in rows) == list(range(400))
    assert {r["instance"] for r in rows} == {"10.0.0.1:9876"}  # one proxy to the analyst


def _same_parquet(spark, merged, expected) -> None:
    """The merge writes each table's Parquet files as Spark does: the same folders (by date where
    Spark partitions), columns, types (timestamps aside: Spark's are microseconds) and rows."""
    from spark_jobs import hold_report

    import pyarrow.dataset as ds

    for name in hold_report.TABLES:
        got, want = spark.read.parquet(str(merged / name)), spark.read.parquet(str(expected / name))
        assert [(f.name, f.dataType) for f in got.schema] == [(f.name, f.dataType) for f in want.schema], name
        rows = [ds.dataset(folder / name, partitioning="hive").count_rows() for folder in (merged, expected)]
        assert rows[0] == rows[1], name
    dates = sorted(p.name for p in (expected / "by_minute").glob("date=*"))
    assert dates and sorted(p.name for p in (merged / "by_minute").glob("date=*")) == dates


def _events_written(spark, logs, out) -> int:
    """Events a report with ``--events-parquet`` writes."""
    from spark_jobs import hold_report

    hold_report.run(spark, [str(logs)], str(out), sketch_k=EXACT.sketch_k, events_parquet=True)
    return spark.read.parquet(str(out / "events")).count()


def _same_table(got: str, expected: str, what: str) -> None:
    """Two CSV tables equal cell for cell, a value derived from a sum of durations to its last
    written digit: a rollup adds durations up in another order than Spark does, and the CSV
    rounds to six decimals."""
    got_rows, expected_rows = list(csv.reader(io.StringIO(got))), list(csv.reader(io.StringIO(expected)))
    assert len(got_rows) == len(expected_rows) and got_rows[0] == expected_rows[0], what
    header = got_rows[0]
    for got_row, expected_row in zip(got_rows[1:], expected_rows[1:], strict=True):
        for name, a, b in zip(header, got_row, expected_row, strict=True):
            if a != b and "." in a + b:
                assert float(a) == pytest.approx(float(b), rel=1e-9, abs=1.01e-6), (what, name)
            else:
                assert a == b, (what, name)


def test_a_rollup_has_the_columns_and_types_of_the_cells_it_stands_for(spark, tmp_path) -> None:
    from spark_jobs import transforms

    (path,) = generate.write(tmp_path, 500, seed=4, start_ms=MIDNIGHT_MS)
    parquet = compact_file(path)
    cells = spark.read.parquet(str(rollup.rollup_path(parquet, *rollup.DEFAULT)))
    expected = transforms.cell_schema(spark)
    assert [(f.name, f.dataType) for f in cells.schema] == [(f.name, f.dataType) for f in expected]


def test_events_from_before_a_column_was_added_read_as_its_default(spark, tmp_path) -> None:
    """A Parquet file of schema version 1 and a JSON line of an older server lack ``instance``:
    both read as its default, beside new events that have it, and none is rejected."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from rmqproxy.observe.compaction import ADDED, COLUMNS
    from spark_jobs import hold_report

    logs = tmp_path / "logs"
    generate.write(logs, 300, seed=5, start_ms=MIDNIGHT_MS)  # new: every event names generate.INSTANCE
    old_lines = [{k: v for k, v in json.loads(x).items() if k not in ADDED}
                 for _, x in generate.events(200, seed=6, start_ms=MIDNIGHT_MS)]  # fmt: skip
    older = logs / "pulls-20240514-00-10.0.0.2_10911-0.jsonl"
    older.write_text("".join(json.dumps(e) + "\n" for e in old_lines[:100]))
    v1 = logs / "date=20240514" / "hour=00" / "pulls-20240514-00-10.0.0.3_10911-0.parquet"
    v1.parent.mkdir(parents=True)
    arrow = {"long": pa.int64(), "int": pa.int32(), "str": pa.string(), "bool": pa.bool_(), "double": pa.float64()}
    first = [(name, arrow[kind]) for name, kind in COLUMNS if name not in ADDED]
    table = pa.table({name: pa.array([e[name] for e in old_lines[100:]], kind) for name, kind in first})
    pq.write_table(table.replace_schema_metadata({"rmqproxy.schema_version": "1"}), v1)
    source = hold_report.extract(spark, [str(logs)])
    parsed, events, _cells = hold_report.transform(source.lines, source.records, columnar=source.columnar)
    assert parsed.where("reason IS NOT NULL").count() == 0
    counts = {row["instance"]: row["count"] for row in events.groupBy("instance").count().collect()}
    assert counts == {generate.INSTANCE: 300, "": 200}


def test_the_report_merges_rollups_itself_only_when_every_file_has_one_and_all_is_local(tmp_path, monkeypatch) -> None:
    """``--engine auto`` merges in the process only what Spark would read as cells alone; anything
    else (rows to read, a cluster, a URI, rows to write) goes to Spark, and says why."""
    from click.testing import CliRunner

    from spark_jobs import hold_report
    from spark_jobs.cli import report

    paths = [p for hour in (2, 1) for p in generate.write(tmp_path / "logs", 300, seed=hour,
                                                            start_ms=MIDNIGHT_MS - hour * 3_600_000)]  # fmt: skip
    logs, out = str(tmp_path / "logs"), str(tmp_path / "out")

    def why_not(*extra: str) -> str:
        cells, reason = hold_report.mergeable(hold_report.parse_args(["-i", logs, "-o", out, *extra]))
        assert bool(cells) != bool(reason), (cells, reason)
        return reason

    unrolled = "1 JSON-lines and 0 Parquet inputs have no rollup for --sketch-k 1024 --short-polling-ms 1000"
    assert why_not() == unrolled  # the folder, not compacted at all
    compact_file(paths[0])
    assert why_not() == unrolled  # the hour not compacted yet
    compact_file(paths[1])
    assert why_not() == "" and why_not("--master", "local[2]") == ""
    assert why_not("--sketch-k", "512").startswith("0 JSON-lines and 2 Parquet inputs have no rollup for --sketch-k 512")
    assert why_not("--master", "spark://127.0.0.1:7077") == "the master is spark://127.0.0.1:7077"
    assert why_not("--events-parquet") == "--events-parquet writes the rows"
    assert why_not("--conf", "spark.sql.shuffle.partitions=4") == "--conf sets Spark settings"
    assert why_not("-i", "hdfs://namenode/logs") == "hdfs://namenode/logs is not a local path"
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "1")
    assert why_not() == "run by spark-submit"
    with pytest.raises(SystemExit, match="--engine merge cannot run: run by spark-submit"):
        hold_report.main(["-i", logs, "-o", out, "--engine", "merge"])
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT")
    result = CliRunner().invoke(report, ["-i", logs, "-o", out, "--source", "stats-log", "--engine", "merge"])
    assert result.exit_code == 2 and "a stats.log is read by Spark" in result.output
    result = CliRunner().invoke(report, ["-i", logs, "-o", out, "--engine", "merge"])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["events"] == 600
