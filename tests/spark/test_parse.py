"""Reading event lines: every line is either an event or a reject with a reason, never dropped."""

from __future__ import annotations

import gzip

import pytest

from .helpers import T0, dumps, event, line, lines_frame

#: The fields a line must have (those added later default, spark_jobs/schema.py's ADDED).
REQUIRED = ("ts_ms", "arrived_ms", "group", "topic", "queue_id", "client_id", "remote", "offset", "max_msgs",
            "suspend_ms", "held", "hold_ms", "service_ms", "total_ms", "wake", "mode", "code", "msgs", "bytes",
            "next_offset", "max_offset")  # fmt: skip


def _good(i: int) -> str:
    return line(event(ts_ms=T0 + i, offset=i))


def test_each_bad_line_is_rejected_with_its_reason(spark) -> None:
    from pyspark.testing import assertDataFrameEqual

    from spark_jobs import transforms

    missing = event()
    del missing["held"]
    del missing["wake"]
    wrong_type = dict(event(), held="yes")
    fractional_offset = dict(event(), offset=1.5)
    nan = dumps(event()).replace('"hold_ms":0.0', '"hold_ms":NaN')
    huge = dumps(event()).replace('"hold_ms":0.0', '"hold_ms":1e999')
    good = [_good(i) for i in range(3)]
    bad = [
        ("", "blank"),
        ("   ", "blank"),
        ("not json", "malformed"),
        ('{"ts_ms":1,', "malformed"),
        ("[1,2]", "malformed"),
        ("null", "malformed"),
        (dumps(wrong_type), "malformed"),
        (dumps(fractional_offset), "malformed"),
        (nan, "malformed"),
        (good[0] + good[1], "trailing_data"),
        (good[0] + " " + good[1], "trailing_data"),
        (good[0] + "\t " + good[1], "trailing_data"),
        (good[0] + " trailing", "trailing_data"),
        (dumps(missing), "missing_field:held,wake"),
        ("{}", "missing_field:" + ",".join(REQUIRED)),
        (huge, "non_finite"),
    ]
    braces = line(event(ts_ms=T0 + 3, client_id="a} b{c", remote="}"))  # braces in strings, no second object
    lines = lines_frame(spark, good + [text for text, _ in bad] + [good[2] + "  ", braces], source="file:/logs/a.jsonl")
    parsed = transforms.parse_lines(lines)

    rejected = transforms.rejected_lines(parsed)
    expected = spark.createDataFrame(
        [("file:/logs/a.jsonl", reason, text) for text, reason in bad], "source string, reason string, line string"
    )
    assertDataFrameEqual(rejected, expected)
    kept = transforms.valid_events(parsed)
    assert sorted(r["ts_ms"] for r in kept.collect()) == [T0, T0 + 1, T0 + 2, T0 + 2, T0 + 3]
    cells = transforms.cell_stats(transforms.enrich(parsed))
    counts = {r["reason"]: r["count"] for r in transforms.reject_counts(cells).collect()}
    assert counts[None] == 5 and sum(counts.values()) == 5 + len(bad)


def test_a_good_line_parses_to_the_exact_event(spark) -> None:
    from spark_jobs import transforms

    e = event(ts_ms=T0 + 5, arrived_ms=T0 - 14_995, held=True, hold_ms=15000.123, service_ms=0.25, total_ms=15000.373,
              wake="timeout", code="PULL_NOT_FOUND", msgs=0, bytes=0, client_id="", remote="[::1]:61000",
              queue_id=7, offset=2**40, next_offset=2**40, max_offset=2**40)  # fmt: skip
    (row,) = transforms.valid_events(transforms.parse_lines(lines_frame(spark, [line(e)]))).collect()
    assert row.asDict() == e


def test_files_directories_globs_and_gzip_are_read_with_their_source(spark, tmp_path) -> None:
    from spark_jobs import files, transforms

    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "pulls-20240513-20.jsonl").write_text(_good(1) + "\n" + _good(2) + "\n")
    with gzip.open(logs / "pulls-20240513-21.jsonl.gz", "wt") as f:
        f.write(_good(3) + "\n{broken\n")
    (tmp_path / "other.jsonl").write_text(_good(4) + "\n")

    def read(*inputs: str) -> list[tuple[int, str | None]]:
        parsed = transforms.parse_lines(files.read_lines(spark, list(inputs)))
        return sorted((r["ts_ms"] or 0, r["reason"]) for r in parsed.collect())

    assert read(str(logs)) == [(0, "malformed"), (T0 + 1, None), (T0 + 2, None), (T0 + 3, None)]
    assert read(str(logs / "*.gz")) == [(0, "malformed"), (T0 + 3, None)]
    assert read(f"file://{logs}/pulls-20240513-20.jsonl", str(tmp_path / "other.jsonl")) == [
        (T0 + 1, None), (T0 + 2, None), (T0 + 4, None)
    ]  # fmt: skip
    rejected = transforms.rejected_lines(transforms.parse_lines(files.read_lines(spark, [str(logs)]))).collect()
    assert [(r["source"].rsplit("/", 1)[-1], r["line"]) for r in rejected] == [("pulls-20240513-21.jsonl.gz", "{broken")]


def test_every_line_is_parsed_once_whichever_rows_are_kept(spark) -> None:
    """Filtering parsed lines (valid events, rejects) must not copy from_json into the filter once
    per field it reads: that made ``--events-parquet`` ~50x slower than the report itself."""
    from spark_jobs import transforms

    parsed = transforms.parse_lines(lines_frame(spark, [_good(0)], source="file:/a"))
    for frame in (transforms.valid_events(transforms.enrich(parsed)), transforms.rejected_lines(parsed)):
        plan = frame._jdf.queryExecution().optimizedPlan().toString()
        assert plan.count("from_json(") == 1, plan


def _plain_and_odd_lines() -> tuple[list[bytes], list[bytes], list[bytes]]:
    """Lines Spark's JSON reader reads as the line parser does (good and bad), lines it reads alike
    that the check still sends to the line parser (a ``}`` before the end), and lines it misreads."""
    good = [_good(i) for i in range(3)]
    missing = event(ts_ms=T0 + 9)
    del missing["wake"]
    plain = [
        *good,
        dumps(dict(event(), held="yes")),
        dumps(dict(event(), offset=1.5)),
        dumps(event()).replace('"hold_ms":0.0', '"hold_ms":NaN'),
        dumps(event()).replace('"hold_ms":0.0', '"hold_ms":1e999'),
        dumps(missing),
        "{}",
        '{"ts_ms":1,}',
        "{not json}",
        line(event(ts_ms=T0 + 4, client_id="é∂")),
    ]
    braced = [line(event(ts_ms=T0 + 3, client_id="a} b{c", remote="}")), dumps(dict(event(), group={"nested": 1}))]
    not_utf8 = line(event(ts_ms=T0 + 5)).encode().replace(b'"remote":"', b'"remote":"\xff')
    odd = ["", "   ", "[1,2]", "null", "not json", '{"ts_ms":1,', good[0] + good[1], good[0] + " " + good[1],
           good[0] + "\t " + good[1], good[0] + " trailing", good[0] + "  ", "\ufeff" + good[0],
           "[" + good[0] + "]"]  # fmt: skip
    return [x.encode() for x in plain] + [not_utf8], [x.encode() for x in braced], [x.encode() for x in odd]


def test_lines_the_json_reader_would_misread_need_the_line_reader(spark, tmp_path) -> None:
    from pyspark.sql import functions as F

    from spark_jobs import files, transforms

    plain, braced, odd = _plain_and_odd_lines()
    (tmp_path / "plain.jsonl").write_bytes(b"\n".join(plain) + b"\n")
    (tmp_path / "odd.jsonl").write_bytes(b"\n".join(braced + odd) + b"\n")
    flagged = files.read_lines(spark, [str(tmp_path)]).select(
        F.col("source").endswith("odd.jsonl").alias("odd"), transforms.needs_line_reader().alias("flag")
    )
    assert sorted(tuple(r) for r in flagged.collect()) == [(False, False)] * len(plain) + [(True, True)] * (
        len(braced) + len(odd)
    )


def test_the_json_reader_reads_plain_lines_as_the_line_parser_does(spark, tmp_path) -> None:
    """Same fields and reasons, line for line (invalid UTF-8 included: malformed for both), and so
    the same cells: ``hold_report`` uses the reader whenever no line needs the line parser."""
    from spark_jobs import files, schema, transforms

    plain, braced, _ = _plain_and_odd_lines()
    (tmp_path / "pulls.jsonl").write_bytes(b"\n".join(plain + braced) + b"\n")
    by_line = transforms.parse_lines(files.read_lines(spark, [str(tmp_path)]))
    by_reader = transforms.parse_records(
        files.read_records(spark, [str(tmp_path)], schema.PULL_EVENT_READ, transforms.JSON_OPTIONS)
    )

    def rows(parsed) -> list[tuple]:
        return sorted((tuple(r) for r in parsed.drop("source", "line").collect()), key=repr)

    assert rows(by_reader) == rows(by_line)
    reasons = sorted(r["reason"] or "" for r in by_line.collect())
    # a string field given an object keeps its JSON text, as Spark's reader does: the sixth good line
    missing = [f"missing_field:{m}" for m in (",".join(REQUIRED), "wake")]
    assert reasons == [""] * 6 + ["malformed"] * 6 + missing + ["non_finite"], reasons

    def counts(parsed) -> dict:
        cells = transforms.cell_stats(transforms.enrich(parsed))
        return {r["reason"]: r["count"] for r in transforms.reject_counts(cells).collect()}

    assert counts(by_reader) == counts(by_line)


def _shape_cases() -> list[bytes]:
    """File contents for the byte check: the edges by hand, then random ones built from the bytes
    that matter (braces, both line ends, a space) and the test lines."""
    import random

    plain, braced, odd = _plain_and_odd_lines()
    one = plain[0]
    bom = "\ufeff".encode()
    cases = [b"", b"\n", b"\r\n", b"{}", b"{}\n", b"{}\n\n", b"\n{}", b"{}\r\n{}", b"{}\r{}", b"}", b"{", b"{}}",
             bom, bom + b"{}", bom + b"\n{}", b"{}\n" + bom + b"{}", bom + one,
             b"{{}", b"{}{}", b"{}\n{}\n", b"{}\n}{\n", one, one + b"\n", b"\n".join(plain), b"\n".join(plain) + b"\n",
             b"\n".join([one, braced[0]]), b"\n".join([one, odd[0], one])]  # fmt: skip
    rng = random.Random(7)
    for _ in range(300):
        if rng.random() < 0.5:
            pieces = [b"{", b"}", b"\n", b"\r", b" ", b"a", b"{a}", b"}\n{"]
            text = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        else:
            picked = [rng.choice(plain if rng.random() < 0.9 else braced + odd) for _ in range(rng.randint(1, 5))]
            text = b"\n".join(picked) + rng.choice([b"", b"\n"])
        cases.append(text)
    return cases


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 8 << 20])
def test_the_byte_check_agrees_with_the_line_check_file_by_file(spark, tmp_path, monkeypatch, chunk) -> None:
    """Every chunk size, so that a newline, a ``}\\n{`` or the final bytes fall across chunk edges."""
    from pyspark.sql import functions as F

    from spark_jobs import files, transforms

    monkeypatch.setattr(files, "_CHUNK", chunk)
    cases = _shape_cases()
    for i, text in enumerate(cases):
        (tmp_path / f"case-{i:03d}.jsonl").write_bytes(text)
    lines = files.read_lines(spark, [str(tmp_path)])
    flagged = lines.groupBy("source").agg(F.max(transforms.needs_line_reader()).alias("odd")).collect()
    by_lines = {r["source"].rsplit("/", 1)[-1]: r["odd"] for r in flagged}
    paths = files.local_files(spark, lines)
    assert paths is not None and len(paths) == len(cases)
    by_bytes = {p.rsplit("/", 1)[-1]: not files.one_object_per_line(p) for p in paths}
    # a file with no lines (empty) has nothing to flag; one with a carriage return goes to the line
    # parser whatever its lines are (it reads them right)
    expected = {f"case-{i:03d}.jsonl": by_lines.get(f"case-{i:03d}.jsonl", False) or b"\r" in text
                for i, text in enumerate(cases)}  # fmt: skip
    assert by_bytes == expected
    assert 0 < sum(by_bytes.values()) < len(cases)


def test_extract_uses_the_json_reader_only_when_no_line_needs_the_line_parser(spark, tmp_path) -> None:
    from spark_jobs import files, hold_report

    clean, mixed = tmp_path / "clean", tmp_path / "mixed"
    for d in (clean, mixed):
        d.mkdir()
        (d / "a.jsonl").write_text(_good(1) + "\n" + _good(2) + "\n")
    (mixed / "b.jsonl").write_text(_good(3) + _good(4) + "\n")
    with gzip.open(tmp_path / "c.jsonl.gz", "wt") as f:
        f.write(_good(5) + " " + _good(6) + "\n")

    assert hold_report.extract(spark, [str(clean)]).plain.result() is True
    assert hold_report.extract(spark, [str(mixed)]).plain.result() is False
    assert files.local_files(spark, files.read_lines(spark, [str(tmp_path / "c.jsonl.gz")])) is None
    assert hold_report.extract(spark, [str(clean), str(tmp_path / "c.jsonl.gz")]).plain.result() is False  # a scan
