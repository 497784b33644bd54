"""The committed dashboards are what the generator makes now, and are JSON Grafana can import:
schema fields, one data source variable every panel and target uses, unique panel ids, a grid
without overlaps, targets with an expression and a unique refId, only metric names and variables
that exist."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from dashboards import generate, names

from .exprs import BUILTINS, REPO, dashboards, panel_targets, panels, rules

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
PANEL_TYPES = {"row", "timeseries", "stat", "heatmap"}
ALL = dashboards()


def test_committed_files_are_what_the_generator_makes_now() -> None:
    stale = generate.stale(generate.render())
    assert not stale, f"run `python -m dashboards` and commit: {[str(p.relative_to(REPO)) for p in stale]}"


def test_check_flag_passes_on_the_committed_files_and_notices_a_stale_copy(tmp_path) -> None:
    check = subprocess.run(
        [sys.executable, "-m", "dashboards", "--check"], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, check.stderr
    copy = subprocess.run(
        [sys.executable, "-m", "dashboards", "--out", str(tmp_path)], cwd=REPO, capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    assert copy.returncode == 0, copy.stderr
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == sorted(
        p.name for p in generate.render()
    )
    rules = tmp_path / "alerts.yml"
    rules.write_text(rules.read_text().replace("> 0.9 *", "> 0.8 *"))
    stale = subprocess.run(
        [sys.executable, "-m", "dashboards", "--check", "--out", str(tmp_path)], cwd=REPO, capture_output=True,
        text=True, check=False,
    )
    assert stale.returncode == 1 and "alerts.yml" in stale.stderr


def test_the_three_dashboards_exist_with_distinct_uids() -> None:
    assert set(ALL) == {"pull-path", "orderly-locks", "broker-overview"}
    uids = [d["uid"] for d in ALL.values()]
    assert len(set(uids)) == len(uids)
    assert all(re.fullmatch(r"[a-z0-9-]{1,40}", uid) for uid in uids)


@pytest.mark.parametrize("stem", sorted(ALL))
def test_dashboard_has_the_fields_grafana_imports(stem: str) -> None:
    d = ALL[stem]
    assert isinstance(d["title"], str) and d["title"].startswith("rmqproxy / ")
    assert isinstance(d["schemaVersion"], int) and d["schemaVersion"] >= 36  # Grafana 9+ panel JSON
    assert d["id"] is None  # an import must not carry another instance's database id
    assert d["time"] == {"from": "now-1h", "to": "now"}
    assert "rmqproxy" in d["tags"]
    assert d["panels"] and d["rows"] == []
    assert isinstance(d["templating"]["list"], list)


@pytest.mark.parametrize("stem", sorted(ALL))
def test_every_panel_and_target_uses_the_datasource_variable(stem: str) -> None:
    d = ALL[stem]
    variables = {v["name"]: v for v in d["templating"]["list"]}
    ds = variables["datasource"]
    assert (ds["type"], ds["query"]) == ("datasource", "prometheus")
    for v in variables.values():
        if v["type"] == "query":
            assert v["datasource"] == DATASOURCE
            assert v["includeAll"] and v["allValue"] == ".*" and v["multi"]
            assert re.fullmatch(r"label_values\(\w+, \w+\)", v["definition"]), v["definition"]
    for panel in panels(d):
        if panel["type"] == "row":
            assert not panel.get("targets")
            continue
        assert panel["datasource"] == DATASOURCE, panel["title"]
        for t in panel["targets"]:
            assert t["datasource"] == DATASOURCE, (panel["title"], t["refId"])


@pytest.mark.parametrize("stem", sorted(ALL))
def test_panel_ids_are_unique_and_the_grid_has_no_overlaps(stem: str) -> None:
    every = panels(ALL[stem])
    ids = [p["id"] for p in every]
    assert all(isinstance(i, int) and i > 0 for i in ids)
    assert len(set(ids)) == len(ids)
    cells: dict[tuple[int, int], str] = {}
    for p in every:
        assert p["type"] in PANEL_TYPES, p["type"]
        pos = p["gridPos"]
        assert set(pos) == {"h", "w", "x", "y"} and all(isinstance(v, int) for v in pos.values())
        assert pos["w"] > 0 and pos["h"] > 0 and pos["x"] >= 0 and pos["y"] >= 0
        assert pos["x"] + pos["w"] <= 24, p["title"]
        if p["type"] == "row":
            assert (pos["w"], pos["h"], pos["x"]) == (24, 1, 0)
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in cells, f"{p['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = p["title"]


@pytest.mark.parametrize("stem", sorted(ALL))
def test_targets_have_an_expression_and_unique_ref_ids(stem: str) -> None:
    for panel in panels(ALL[stem]):
        if panel["type"] == "row":
            continue
        targets = panel["targets"]
        assert targets, panel["title"]
        refs = [t["refId"] for t in targets]
        assert all(re.fullmatch(r"[A-Z]", r) for r in refs) and len(set(refs)) == len(refs), panel["title"]
        for t in targets:
            assert isinstance(t["expr"], str) and t["expr"].strip(), panel["title"]
            assert t["expr"].count("(") == t["expr"].count(")"), t["expr"]
        if panel["type"] == "heatmap":
            assert panel["options"]["calculate"] is False
            assert [(t["format"], t["legendFormat"]) for t in targets] == [("heatmap", "{{le}}")]
            assert "sum by (le)" in targets[0]["expr"]


@pytest.mark.parametrize("stem", sorted(ALL))
def test_expressions_use_only_defined_variables_and_exported_metrics(stem: str) -> None:
    d = ALL[stem]
    defined = {v["name"] for v in d["templating"]["list"]} | set(BUILTINS)
    series = set()
    for family in names.CATALOG.values():
        suffixes = {"counter": ["_total"], "gauge": [""], "histogram": ["_bucket", "_sum", "_count"]}[family.type]
        series |= {family.name + s for s in suffixes}
    for panel in panels(d):
        for t in panel.get("targets", []):
            used = set(re.findall(r"\$\{?(\w+)\}?", t["expr"]))
            assert used <= defined, (panel["title"], used - defined)
            metrics = set(re.findall(r"\b(?:rmqproxy|rocketmq)_\w+", t["expr"]))
            assert metrics and metrics <= series, (panel["title"], metrics - series)


def test_pull_path_has_the_panels_issue_9_asks_for() -> None:
    titles = {p["title"] for p in panels(ALL["pull-path"])}
    for wanted in (
        "Client pull RT vs server pull latency",
        "Server pull latency p50 / p99, held vs not held",
        "Hold time",
        "Wake reasons",
        "Held pulls of maxHeldPulls",
        "Timeout overshoot p50 / p99",
        "Service time p99 (alert on this)",
    ):
        assert wanted in titles
    exprs = " ".join(t["expr"] for p in panels(ALL["pull-path"]) for t in p.get("targets", []))
    assert "by (le, held)" in exprs and "rocketmq_client_consumer_pull_rt" in exprs


def test_metric_names_come_from_rmqproxy_metrics() -> None:
    """The names module reads rmqproxy's own objects: a family rmqproxy exports but no name here
    uses would be a metric no dashboard or rule shows."""
    used = {v.name for v in vars(names).values() if isinstance(v, names.Family)}
    assert used == set(names.CATALOG)
    assert names.PULL_SERVICE.bucket == "rmqproxy_pull_service_seconds_bucket"
    assert names.HOLD_WAKEUPS.total == "rmqproxy_hold_wakeups_total"
    with pytest.raises(TypeError):
        names.HELD_PULLS.total  # noqa: B018 (a gauge has no _total)


def test_every_metric_rmqproxy_exports_is_on_a_dashboard_or_in_a_rule() -> None:
    text = " ".join([t.expr for t in panel_targets()] + [r["expr"] for r in rules()])
    unused = [name for name in names.CATALOG if not re.search(rf"\b{name}(_total|_bucket|_sum|_count)?\b", text)]
    assert not unused
