"""One local[2] SparkSession for the whole test run (startup costs seconds; share it).

Spark's scratch space, warehouse and Derby home go under pytest's tmp dir, never the repo. Without
pyspark or java the Spark tests are skipped, or fail when ``CI=true``. ``PYSPARK_PYTHON`` is this
interpreter, so any Python worker (and the local-cluster test's executors) match the driver.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator

import pytest

from tests.needs import skip_or_fail

# The class data sharing archive (spark_jobs.cds) stays out of the tests' jobs: no cache written
# under the home directory, no recording run's extra seconds. tests/spark/test_cds.py turns it on.
os.environ.setdefault("SPARK_JOBS_CDS", "off")


def _require(condition: bool, message: str) -> None:
    if not condition:
        skip_or_fail(message)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    _require(shutil.which("java") is not None, "Spark tests need java on PATH")
    try:
        import pyspark  # noqa: F401
    except ImportError:
        _require(False, "Spark tests need pyspark (pip install -e '.[test]')")
    from spark_jobs.session import build_session

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    scratch = tmp_path_factory.mktemp("spark")
    session = build_session(
        "rmqproxy-tests",
        "local[2]",
        {
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.sql.warehouse.dir": str(scratch / "warehouse"),
            "spark.local.dir": str(scratch / "local"),
            "spark.driver.extraJavaOptions": f"-Dderby.system.home={scratch / 'derby'}",
            "spark.driver.memory": "1g",
        },
    )
    try:
        yield session
    finally:
        session.stop()
