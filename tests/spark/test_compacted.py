"""A report over a compacted event log is the report over its JSON lines: the same summary and
the same tables (percentiles exact, see ``_report``), whether every file or some of them has
been compacted, read from their rollups or their rows, a crash between a compaction's rename
and its delete included."""

from __future__ import annotations

import shutil
import time

import csv
import io

import pytest

from rmqproxy.observe import rollup
from rmqproxy.observe.compaction import compact, compact_file, dataset_files, twin
from spark_jobs import files, generate

MIDNIGHT_MS = 1_715_644_800_000  # 2024-05-14 00:00:00 UTC
#: The report's options in ``_report``: rollups made for them stand for their files' rows.
EXACT = rollup.Options(sketch_k=65_535)
TORN = b'{"ts_ms":1715644800001,"arrived_ms"\n'
WRONG = b'{"ts_ms":"late"}\n'


def _report(spark, logs, out) -> tuple[dict, dict[str, str]]:
    from spark_jobs import hold_report

    # A sketch larger than any cell keeps every value, so the percentiles are exact: equal whatever
    # the partitioning (with a smaller one they differ within its rank error, by read order).
    summary = hold_report.run(spark, [str(logs)], str(out), sketch_k=EXACT.sketch_k, min_pulls=1, top=5)
    kept = {k: v for k, v in summary.items() if k not in ("inputs", "output", "seconds")}
    tables = {p.name: p.read_text() for p in sorted((out / "csv").glob("*.csv"))}
    return kept, tables


def test_the_report_is_the_same_from_json_lines_compacted_and_half_compacted_logs(spark, tmp_path) -> None:
    logs = tmp_path / "json"
    paths = [path for hour in (3, 2, 1) for path in generate.write(
        logs, 8_000 // 3 + (hour == 1) * (8_000 % 3), seed=hour, start_ms=MIDNIGHT_MS - hour * 3_600_000)]  # fmt: skip
    assert len(paths) == 3  # one file an hour
    with paths[0].open("ab") as f:
        f.write(TORN + WRONG + b"\n")
    compacted, half = tmp_path / "compacted", tmp_path / "half"
    shutil.copytree(logs, compacted)
    shutil.copytree(logs, half)
    assert len(compact(compacted, now=time.time() + 86_400, cells=EXACT)) == 3
    compact_file(half / paths[0].name, cells=EXACT)
    compact_file(half / paths[1].name)  # its rollup is for other options: the report reads its rows
    shutil.copy(logs / paths[1].name, half / paths[1].name)  # as a crash between the rename and the delete leaves it
    expected, expected_tables = _report(spark, logs, tmp_path / "out-json")
    assert expected["events"] == 8_000 and expected["rejected"] == 3
    for folder, rolled in ((compacted, 3), (half, 1)):
        assert dataset_files(folder)[1], folder
        assert len(files.event_dataset(spark, [str(folder)], EXACT).cells) == rolled
        summary, tables = _report(spark, folder, tmp_path / f"out-{folder.name}")
        assert summary == expected, folder
        assert tables.keys() == expected_tables.keys()
        for name, text in tables.items():
            _same_table(text, expected_tables[name], f"{folder.name}/{name}")
    events = _events_written(spark, compacted, tmp_path / "out-events")
    assert events == 8_000  # --events-parquet writes the rows of rolled files too
    assert twin(half / paths[1].name).exists() and (half / paths[1].name).exists()
    assert not (half / paths[0].name).exists() and (half / paths[2].name).exists()


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
