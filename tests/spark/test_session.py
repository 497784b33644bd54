"""spark_jobs.session: runtime settings scoped to a block."""

from __future__ import annotations

import pytest

from spark_jobs import session


def test_settings_apply_inside_the_block_and_are_put_back_after(spark) -> None:
    shuffle = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.unset("spark.sql.codegen.factoryMode")
    with pytest.raises(RuntimeError):
        with session.settings(spark, {"spark.sql.shuffle.partitions": "7", **session.INTERPRETED}):
            assert spark.conf.get("spark.sql.shuffle.partitions") == "7"
            assert spark.conf.get("spark.sql.codegen.wholeStage") == "false"
            assert spark.conf.get("spark.sql.codegen.factoryMode") == "NO_CODEGEN"
            # a query runs interpreted, with the same answer
            assert spark.range(10).selectExpr("sum(id * 2) AS s").first()["s"] == 90
            raise RuntimeError("the body fails")
    assert spark.conf.get("spark.sql.shuffle.partitions") == shuffle
    assert spark.conf.get("spark.sql.codegen.wholeStage") == "true"
    # a setting that was not set before is unset again (its default shows)
    assert spark.conf.get("spark.sql.codegen.factoryMode") == "FALLBACK"
