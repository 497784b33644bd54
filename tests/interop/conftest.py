"""Fixtures for tests that use the real Apache RocketMQ Java classes (see oracle.py, scenario_runner.py).

``oracle_line`` is "4.9" or "5"; ``oracle`` is one running Java oracle per line for the whole
session (ids ``rocketmq-4.9.8`` / ``rocketmq-5.x.y``).  ``scenario_line`` and ``program`` are the
same for the real-client scenario program.  Every test collected under this directory is marked
``interop``.  Without ``mvn`` or ``java`` the tests are skipped, or fail when ``CI=true``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.needs import require_java_tools

from .oracle import ORACLE_LINES, Oracle
from .scenario_runner import ScenarioProgram

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.interop)


@pytest.fixture(scope="session", params=list(ORACLE_LINES), ids=lambda line: f"rocketmq-{ORACLE_LINES[line]}")
def oracle_line(request: pytest.FixtureRequest) -> str:
    """The client line under test: "4.9" or "5"."""
    return request.param


@pytest.fixture(scope="session")
def oracle(oracle_line: str) -> Iterator[Oracle]:
    """A running Java oracle for ``oracle_line`` (built with Maven on first use, then reused)."""
    require_java_tools("the interop oracle")
    proc = Oracle(oracle_line)
    try:
        yield proc
    finally:
        proc.close()


@pytest.fixture(scope="session", params=list(ORACLE_LINES), ids=lambda line: f"rocketmq-{ORACLE_LINES[line]}")
def scenario_line(request: pytest.FixtureRequest) -> str:
    """The client line of the scenario program: "4.9" or "5"."""
    return request.param


@pytest.fixture(scope="session")
def program(scenario_line: str, tmp_path_factory: pytest.TempPathFactory) -> ScenarioProgram:
    """The scenario program built for the line (Maven on first use, then reused)."""
    require_java_tools("the scenario program")
    return ScenarioProgram(scenario_line, log_root=tmp_path_factory.mktemp(f"scenarios-{scenario_line}"))
