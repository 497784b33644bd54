"""The explicit Spark schema is PullEvent, field for field."""

from __future__ import annotations

import dataclasses

import pytest

from rmqproxy.observe.pull_events import PullEvent

T = pytest.importorskip("pyspark.sql.types")


def test_schema_lists_pull_event_fields_in_order_with_matching_types() -> None:
    from spark_jobs.schema import PULL_EVENT

    python_types = {
        T.LongType: "int", T.IntegerType: "int", T.StringType: "str", T.BooleanType: "bool", T.DoubleType: "float",
    }  # fmt: skip
    fields = [(f.name, f.type) for f in dataclasses.fields(PullEvent)]
    assert [f.name for f in PULL_EVENT.fields] == [name for name, _ in fields]
    for spark_field, (name, annotation) in zip(PULL_EVENT.fields, fields, strict=True):
        assert python_types[type(spark_field.dataType)] == annotation, name


def test_compacted_files_have_the_spark_schemas_columns_and_types() -> None:
    from rmqproxy.observe.compaction import COLUMNS
    from spark_jobs.schema import PULL_EVENT_COLUMNAR

    kinds = {T.LongType: "long", T.IntegerType: "int", T.StringType: "str", T.BooleanType: "bool", T.DoubleType: "double"}
    assert [(f.name, kinds[type(f.dataType)]) for f in PULL_EVENT_COLUMNAR.fields] == list(COLUMNS)


def test_compaction_and_spark_give_added_fields_the_same_defaults() -> None:
    from rmqproxy.observe.compaction import ADDED as COMPACTED_DEFAULTS
    from spark_jobs.schema import ADDED

    assert ADDED == COMPACTED_DEFAULTS
