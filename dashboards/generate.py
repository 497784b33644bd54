"""Render the committed files: ``dashboards/json/<name>.json`` and ``dashboards/alerts.yml``.

``render()`` is pure (file path → text), so ``python -m dashboards --check`` and the test that
keeps the committed files in step with the generator compare the same strings that ``write``
stores. JSON is indented with sorted keys, so a change to a panel is a readable diff.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from grafanalib._gen import DashboardEncoder

from . import alerts, broker_overview, orderly_locks, pull_path

ROOT = Path(__file__).resolve().parent

#: File stem under json/ → builder. The stems are part of the README's import instructions.
DASHBOARDS: dict[str, Callable] = {
    "pull-path": pull_path.build,
    "orderly-locks": orderly_locks.build,
    "broker-overview": broker_overview.build,
}


def dashboard_json(build: Callable) -> str:
    return json.dumps(build().to_json_data(), cls=DashboardEncoder, indent=2, sort_keys=True) + "\n"


def render(root: Path = ROOT) -> dict[Path, str]:
    files = {root / "json" / f"{stem}.json": dashboard_json(build) for stem, build in DASHBOARDS.items()}
    files[root / "alerts.yml"] = alerts.render()
    return files


def write(files: dict[Path, str]) -> list[Path]:
    """Write what differs; return the paths written."""
    written = []
    for path, text in files.items():
        if not path.is_file() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            written.append(path)
    return written


def stale(files: dict[Path, str]) -> list[Path]:
    """Paths whose content is not what the generator produces now."""
    return [path for path, text in files.items() if not path.is_file() or path.read_text() != text]
