"""Run a test directory on both codec implementations (issue 40): its conftest imports
``codec_implementation``, an autouse fixture parametrized over compiled and pure.

Without the extension the compiled run is skipped with the reason (pure-only machines), except
under CI, where it fails: CI must prove both paths.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping

import pytest

from codec import implementation
from tests.needs import skip_or_fail


@pytest.fixture(params=[implementation.COMPILED, implementation.PURE], autouse=True)
def codec_implementation(request: pytest.FixtureRequest) -> Iterator[str]:
    """The codec implementation bound for this test ("compiled" or "pure"); restored after it."""
    kind = request.param
    if kind == implementation.COMPILED and not implementation.available():
        skip_or_fail(f"compiled codec not available: {implementation.unavailable_reason()}")
    previous = implementation.use(kind)
    try:
        yield kind
    finally:
        implementation.use(previous)


def child_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) for a child Python process that must run
    the implementation bound here: a test's [pure] run would otherwise start a compiled child."""
    env = dict(os.environ if base is None else base)
    env.pop(implementation.ENV, None)
    if implementation.active() == implementation.PURE:
        env[implementation.ENV] = "1"
    return env
