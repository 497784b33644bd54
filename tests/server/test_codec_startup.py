"""The start-up log names the codec implementation in use (issue 40), so an operator can tell a
pure-Python server (no compiler at install, or RMQPROXY_PURE_PYTHON) from a compiled one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from twisted.logger import formatEvent, globalLogPublisher

from codec import implementation
from tests.implementations import child_env

ROOT = Path(__file__).resolve().parents[2]


def test_start_up_log_names_the_codec_in_use(servers, codec_implementation: str, tmp_path: Path) -> None:
    events: list[dict] = []
    globalLogPublisher.addObserver(events.append)
    try:
        servers(tmp_path)
    finally:
        globalLogPublisher.removeObserver(events.append)
    (line,) = [formatEvent(e) for e in events if "rmqproxy listening on" in e.get("log_format", "")]
    assert line.endswith(f", codec {implementation.describe()}")
    assert implementation.describe().split(":")[0] == codec_implementation


def test_a_child_process_runs_the_implementation_of_its_test(codec_implementation: str) -> None:
    """The crash, disk-full and real-command tests start Python children: ``child_env`` makes a
    [pure] test's child pure too, and a [compiled] one's compiled even if this shell forced pure."""
    child = subprocess.run([sys.executable, "-c", "from codec import implementation; print(implementation.describe())"],
                           cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    expected = "compiled" if codec_implementation == "compiled" else f"pure: {implementation.ENV}=1"
    assert child.stdout.strip() == expected
