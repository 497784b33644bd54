"""What the committed dashboards and rules ask Prometheus, read back from the committed files.

Tests read the JSON and YAML that users import (not the Python that generates them), so what is
checked is what ships. ``concrete(expr)`` replaces Grafana's variables the way Grafana would with
"All" selected and a 1-hour range over 15 s scrapes: ``$instance``, ``$topic`` and
``$consumer_group`` become ``.*`` (their ``allValue``), ``$__rate_interval`` becomes ``1m`` (four
scrape intervals). Keyword arguments pin a variable to a value instead.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
JSON_DIR = REPO / "dashboards" / "json"
ALERTS = REPO / "dashboards" / "alerts.yml"

#: Grafana's own variables used by the dashboards, and what tests substitute for them.
BUILTINS = {"__rate_interval": "1m"}
#: The dashboards' query variables (all with allValue ``.*``).
QUERY_VARIABLES = ("instance", "topic", "consumer_group")
VARIABLE = re.compile(r"\$\{?(\w+)\}?")


@dataclasses.dataclass(frozen=True)
class PanelTarget:
    dashboard: str
    panel: str
    ref: str
    expr: str
    legend: str

    def __str__(self) -> str:
        return f"{self.dashboard} / {self.panel} / {self.ref}"


def dashboards() -> dict[str, dict]:
    """File stem → parsed dashboard JSON."""
    return {p.stem: json.loads(p.read_text()) for p in sorted(JSON_DIR.glob("*.json"))}


def panels(dashboard: dict) -> list[dict]:
    """Every panel, rows' nested panels included."""
    out = []
    for panel in dashboard["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))
    return out


def panel_targets() -> list[PanelTarget]:
    return [
        PanelTarget(stem, panel["title"], t["refId"], t["expr"], t.get("legendFormat", ""))
        for stem, dashboard in dashboards().items()
        for panel in panels(dashboard)
        for t in panel.get("targets", [])
    ]


def rules() -> list[dict]:
    return [rule for group in yaml.safe_load(ALERTS.read_text())["groups"] for rule in group["rules"]]


def concrete(expr: str, **pinned: str) -> str:
    def value(match: re.Match) -> str:
        name = match.group(1)
        if name in pinned:
            return pinned[name]
        if name in BUILTINS:
            return BUILTINS[name]
        if name in QUERY_VARIABLES:
            return ".*"
        return match.group(0)  # not a variable of ours ($1 in a label_replace)

    return VARIABLE.sub(value, expr)


def legend_labels(legend: str) -> set[str]:
    return set(re.findall(r"\{\{\s*(\w+)\s*\}\}", legend))
