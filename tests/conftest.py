"""Shared test fixtures: where the recorded Java session lives."""

from __future__ import annotations

import os
from pathlib import Path

from tests.needs import skip_or_fail

REPO = Path(__file__).resolve().parents[1]


def find_session_vectors() -> Path:
    """The recorded Java 4.9.7 session: ``$RMQ_SESSION_VECTORS``, else the one in ``tests/vectors/``.

    Missing everywhere, it fails under CI and skips elsewhere.
    """
    candidates = [
        os.environ.get("RMQ_SESSION_VECTORS", ""),
        str(REPO / "tests" / "vectors" / "java-4.9.7-session.jsonl"),
    ]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    skip_or_fail(f"recorded session not found (set RMQ_SESSION_VECTORS): {candidates}")
