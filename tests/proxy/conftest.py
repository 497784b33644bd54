"""Fixtures of the proxy tests. The ones against a real Apache cluster (``test_via_*.py``) are
marked ``interop`` and use the interop suite's client lines and scenario program."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.interop.conftest import oracle_line, program, scenario_line  # noqa: F401 (fixtures)

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.path)).resolve()
        if path.parent == _HERE and path.name.startswith("test_via_"):
            item.add_marker(pytest.mark.interop)
