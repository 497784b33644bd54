"""spark_jobs.session: runtime settings scoped to a block; speculative jobs."""

from __future__ import annotations

import threading
from concurrent.futures import Future

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


def _decided(value: bool | Exception) -> Future:
    future: Future = Future()
    if isinstance(value, Exception):
        future.set_exception(value)
    else:
        future.set_result(value)
    return future


def test_speculate_keeps_the_result_when_the_check_holds(spark) -> None:
    pending: Future = Future()
    threading.Timer(0, pending.set_result, (True,)).start()
    assert session.speculate(spark, lambda: spark.range(5).count(), pending) == 5
    assert session.speculate(spark, lambda: spark.range(3).count(), _decided(True)) == 3


def test_speculate_skips_the_action_when_the_check_has_already_failed(spark) -> None:
    ran = []
    assert session.speculate(spark, lambda: ran.append(1), _decided(False)) is None
    assert ran == []
    with pytest.raises(OSError):
        session.speculate(spark, lambda: ran.append(1), _decided(OSError("gone")))
    assert ran == []


def test_speculate_cancels_a_running_job_when_the_check_fails(spark) -> None:
    """The check fails while the job runs: the job is cancelled (it would run for minutes), the
    result is None, and jobs started later in the same thread carry no leftover tag."""
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup(None))
    check: Future = Future()

    def fail_once_running() -> None:
        while not set(tracker.getActiveJobsIds()) - before:
            threading.Event().wait(0.05)
        check.set_result(False)

    threading.Thread(target=fail_once_running, daemon=True).start()
    endless = spark.range(10**13, numPartitions=2).selectExpr("sum(id * 2) AS s")
    assert session.speculate(spark, lambda: endless.first(), check) is None
    jobs = set(tracker.getJobIdsForGroup(None)) - before
    assert jobs and all(tracker.getJobInfo(j).status == "FAILED" for j in jobs)
    assert not set(spark.sparkContext.getJobTags())
