"""Grafana building blocks on top of grafanalib: targets, panels, variables and the grid.

Conventions every dashboard here follows (``tests/dashboards`` checks them on the JSON):

- One data source variable, ``datasource`` (type prometheus); every panel and every target refers
  to it as ``{"type": "prometheus", "uid": "${datasource}"}``, so an import asks for nothing and
  works with any Prometheus data source.
- Query variables ``instance``, ``topic``, ``consumer_group`` allow several values and "All"
  (``.*``); expressions match them with ``=~``.
- ``layout`` assigns ids (1, 2, ... in reading order) and grid positions: rows of panels filling the
  24 columns, each row under a row header.
- ``SCHEMA_VERSION`` is that of Grafana 10.4/11 dashboards, whose panel JSON this emits (time
  series, stat, the calculate-free heatmap); older schema numbers would make Grafana run its
  migrations over it.
"""

from __future__ import annotations

import attr
from grafanalib import core as g

SCHEMA_VERSION = 39
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
ROW_HEIGHT = 8
COLUMNS = 24

#: Query variable name → its label in Grafana.
VARIABLES = {
    "instance": "Instance",
    "topic": "Topic",
    "consumer_group": "Consumer group",
}


def target(expr: str, legend: str = "", *, ref: str = "", heatmap: bool = False, instant: bool = False) -> g.Target:
    return g.Target(
        expr=expr,
        legendFormat=legend,
        refId=ref,
        format="heatmap" if heatmap else "time_series",
        intervalFactor=1,
        step=None,
        instant=instant,
        datasource=DATASOURCE,
    )


def _refs(targets: list[g.Target]) -> list[g.Target]:
    """Give targets refIds A, B, ... in order (Grafana needs them unique within a panel)."""
    return [attr.evolve(t, refId=t.refId or chr(ord("A") + i)) for i, t in enumerate(targets)]


def steps(*values: tuple[str, float | None]) -> list[dict]:
    """Threshold steps: ``("green", None), ("red", 0.1)``."""
    return [{"color": color, "value": value} for color, value in values]


def timeseries(
    title: str,
    targets: list[g.Target],
    *,
    unit: str = "short",
    description: str = "",
    stack: bool = False,
    thresholds: list[dict] | None = None,
    log_scale: bool = False,
) -> g.TimeSeries:
    return g.TimeSeries(
        title=title,
        description=description,
        dataSource=DATASOURCE,
        targets=_refs(targets),
        unit=unit,
        fillOpacity=30 if stack else 10,
        stacking={"mode": "normal", "group": "A"} if stack else {"mode": "none", "group": "A"},
        thresholds=thresholds or steps(("green", None)),
        thresholdsStyleMode="line" if thresholds else "off",
        scaleDistributionType="log" if log_scale else "linear",
        scaleDistributionLog=10 if log_scale else 2,
        legendDisplayMode="table",
        legendPlacement="bottom",
        legendCalcs=["lastNotNull", "max"],
        tooltipMode="multi",
        tooltipSort="desc",
        showPoints="never",
        maxDataPoints=None,
    )


def stat(
    title: str,
    targets: list[g.Target],
    *,
    unit: str = "short",
    description: str = "",
    thresholds: list[dict] | None = None,
) -> g.Stat:
    return g.Stat(
        title=title,
        description=description,
        dataSource=DATASOURCE,
        targets=_refs(targets),
        format=unit,
        reduceCalc="lastNotNull",
        thresholds=thresholds or steps(("green", None)),
        colorMode="value",
        graphMode="area",
        noValue="0",
        maxDataPoints=None,
    )


@attr.s
class Heatmap(g.Panel):
    """Grafana 9+ heatmap of pre-bucketed Prometheus histograms (``format: heatmap``, no calculation).

    grafanalib's ``Heatmap`` writes the pre-9 (Angular) model, which Grafana migrates on load; this
    writes the current one: ``options.calculate`` false, y axis in ``unit``.
    """

    unit = attr.ib(default="s")

    def to_json_data(self) -> dict:
        return self.panel_json({
            "type": "heatmap",
            "fieldConfig": {
                "defaults": {
                    "custom": {
                        "hideFrom": {"legend": False, "tooltip": False, "viz": False},
                        "scaleDistribution": {"type": "linear"},
                    },
                },
                "overrides": [],
            },
            "options": {
                "calculate": False,
                "cellGap": 1,
                "color": {
                    "mode": "scheme", "scheme": "Oranges", "scale": "exponential", "exponent": 0.5,
                    "steps": 64, "reverse": False, "fill": "dark-orange",
                },
                "exemplars": {"color": "rgba(255,0,255,0.7)"},
                "filterValues": {"le": 1e-9},
                "legend": {"show": True},
                "rowsFrame": {"layout": "auto"},
                "showValue": "never",
                "tooltip": {"mode": "single", "show": True, "yHistogram": False},
                "yAxis": {"axisPlacement": "left", "reverse": False, "unit": self.unit},
            },
        })  # fmt: skip


def heatmap(title: str, expr: str, *, unit: str = "s", description: str = "") -> Heatmap:
    """``expr`` must keep ``le`` (``sum by (le) (increase(..._bucket[...]))``)."""
    return Heatmap(
        title=title,
        description=description,
        dataSource=DATASOURCE,
        targets=_refs([target(expr, "{{le}}", heatmap=True)]),
        unit=unit,
        maxDataPoints=None,
    )


def variables(**sources: str) -> g.Templating:
    """The data source variable, then one multi-value query variable per ``name=series``: its values
    are ``label_values(series, name)``."""
    items: list[dict] = [{
        "name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
        "current": {}, "hide": 0, "options": [], "refresh": 1, "regex": "", "includeAll": False, "multi": False,
    }]  # fmt: skip
    for name, source in sources.items():
        query = f"label_values({source}, {name})"
        items.append({
            "name": name, "label": VARIABLES[name], "type": "query", "datasource": DATASOURCE,
            "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
            "definition": query, "current": {"text": ["All"], "value": ["$__all"], "selected": True},
            "includeAll": True, "allValue": ".*", "multi": True, "refresh": 2, "sort": 1, "hide": 0,
            "options": [], "regex": "",
        })  # fmt: skip
    return g.Templating(list=items)


Cell = g.Panel | tuple[g.Panel, int]


def layout(rows: list[tuple[str, list[Cell]]]) -> list[g.Panel]:
    """Row headers and their panels with ids and grid positions.

    A cell is a panel (the row's width is shared equally) or ``(panel, width)``.
    """
    panels: list[g.Panel] = []
    y = 0
    ids = iter(range(1, 10_000))
    for title, cells in rows:
        panels.append(g.RowPanel(title=title, id=next(ids), gridPos=g.GridPos(h=1, w=COLUMNS, x=0, y=y)))
        y += 1
        fixed = sum(c[1] for c in cells if isinstance(c, tuple))
        free = [c for c in cells if not isinstance(c, tuple)]
        share = (COLUMNS - fixed) // len(free) if free else 0
        x = 0
        for cell in cells:
            panel, width = cell if isinstance(cell, tuple) else (cell, share)
            if x + width > COLUMNS:
                x, y = 0, y + ROW_HEIGHT
            panels.append(attr.evolve(panel, id=next(ids), gridPos=g.GridPos(h=ROW_HEIGHT, w=width, x=x, y=y)))
            x += width
        y += ROW_HEIGHT
    return panels


def dashboard(*, uid: str, title: str, description: str, tags: list[str], templating: g.Templating,
              rows: list[tuple[str, list[Cell]]]) -> g.Dashboard:  # fmt: skip
    return g.Dashboard(
        uid=uid,
        title=title,
        description=description,
        tags=["rmqproxy", *tags],
        templating=templating,
        panels=layout(rows),
        schemaVersion=SCHEMA_VERSION,
        graphTooltip=1,  # shared crosshair
        time=g.Time("now-1h", "now"),
        refresh="30s",
        timezone="browser",
        editable=True,
    )
