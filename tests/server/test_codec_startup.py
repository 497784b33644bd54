"""The start-up log names the codec implementation in use (issue 40), so an operator can tell a
pure-Python server (no compiler at install, or RMQPROXY_PURE_PYTHON) from a compiled one."""

from __future__ import annotations

from pathlib import Path

from twisted.logger import formatEvent, globalLogPublisher

from codec import implementation


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
