"""One local[2] SparkSession for the whole test run (startup costs seconds; share it).

Spark's scratch space, warehouse and Derby home go under pytest's tmp dir, never the repo. Without
pyspark or java the Spark tests are skipped, or fail when ``CI=true``. ``PYSPARK_PYTHON`` is this
interpreter, so any Python worker (and the local-cluster test's executors) match the driver.
"""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

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


_REAL_LOG = Path(__file__).resolve().parent / "test_interop_real_log.py"


@pytest.fixture(scope="session", autouse=True)
def real_log_runs(request: pytest.FixtureRequest,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[concurrent.futures.Future | None]:
    """The Java client runs test_interop_real_log.py reads, started with the first Spark test when
    that module's tests are selected and Java is there: they are about 35 s of mostly waiting
    (15 s long polls), which the other Spark tests then overlap. None when not started."""
    from tests.interop.maven import missing_tools

    if missing_tools() or not any(Path(str(item.path)) == _REAL_LOG for item in request.session.items):
        yield None
        return
    from .test_interop_real_log import run_clients

    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="real-log") as pool:
        yield pool.submit(run_clients, tmp_path_factory.mktemp("interop-real-log"))
