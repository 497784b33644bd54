"""What a test needs from the machine: skip without it here, fail without it under CI.

CI (``CI=true``) installs every tool and input the suite uses, so a missing one there is a broken
setup to report, not a test to skip.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

from tests.interop.maven import missing_tools


def skip_or_fail(message: str) -> NoReturn:
    """Skip the test with ``message``; under CI, fail it instead."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def require_java_tools(what: str) -> None:
    """Maven and Java on PATH, which ``what`` (e.g. "the interop oracle") needs to build and run."""
    missing = missing_tools()
    if missing:
        skip_or_fail(f"{what} needs {' and '.join(missing)} on PATH")
