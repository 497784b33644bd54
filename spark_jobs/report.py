"""The HTML report: one self-contained file (charts as embedded PNGs, no scripts, no links out).

Input is plain Python: the summary dict and the small summary tables the jobs already collected
(``Table(columns, rows)``), so this module needs neither Spark nor a session and renders the
same way for ``hold_report`` (rmqproxy event logs) and ``stats_log`` (an Apache broker's
stats.log, which lacks hold times: charts whose columns are missing are left out, with a note).
Charts are drawn with matplotlib's Agg backend.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import io
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from .defaults import DEFAULT_SKETCH_K, rank_error

HOLD = "#4c72b0"
SERVICE = "#dd8452"
TOTAL = "#55a868"
WAKE_COLOURS = {"none": "#8c8c8c", "arrival": "#55a868", "timeout": "#4c72b0", "disconnect": "#c44e52",
                "shutdown": "#8172b3", "other": "#ccb974"}  # fmt: skip


class Table(NamedTuple):
    columns: list[str]
    rows: list[tuple]

    def has(self, *names: str) -> bool:
        return all(n in self.columns for n in names)

    def dicts(self) -> list[dict]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


def _tables(collected: Mapping[str, tuple[list[str], list[tuple]]]) -> defaultdict[str, Table]:
    """A job's collected (columns, rows) by table name as Tables; an absent one is empty."""
    return defaultdict(_no_table, {name: Table(*table) for name, table in collected.items()})


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _label(row: dict) -> str:
    return f"{row['group']} / {row['topic']}"


def _num(value: object) -> float:
    return float("nan") if value is None else float(value)


# ---------------------------------------------------------------------------------------------
# charts: each returns (title, caption, png base64) or None when its data is missing


def chart_time_split(group_topic: Table):
    if not group_topic.rows or not group_topic.has("hold_ms_sum", "service_ms_sum"):
        return None
    rows = sorted(group_topic.dicts(), key=lambda r: _num(r["total_ms_sum"]))
    labels = [_label(r) for r in rows]
    hold = [_num(r["hold_ms_sum"]) / 1000 for r in rows]
    service = [_num(r["service_ms_sum"]) / 1000 for r in rows]
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(rows) + 1.2))
    ax.barh(labels, hold, color=HOLD, label="held (waiting for messages)")
    ax.barh(labels, service, left=hold, color=SERVICE, label="service (broker working)")
    for y, (h, s) in enumerate(zip(hold, service, strict=True)):
        share = h / (h + s) if h + s > 0 else 0.0
        ax.text(h + s, y, f"  {share:.1%} held", va="center", fontsize=8)
    ax.set_xlabel("pull time, seconds (sum over all pulls)")
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    return (
        "Where pull time goes",
        ("Total pull time the clients saw, split into time held waiting for a message and time the broker spent "
        "serving. A long pull RT with a large held share is an idle queue, not a slow broker."),
        _png(fig),
    )


def chart_rate_vs_rt(by_minute: Table, rates: Table):
    service = "service_ms_p50" if by_minute.has("service_ms_p50") else "service_ms_mean"
    if not by_minute.rows or not by_minute.has("msgs_per_min", service):
        return None
    rows = by_minute.dicts()
    has_total = by_minute.has("total_ms_p50")
    kind = "median" if service.endswith("p50") else "mean"
    fig, ax = plt.subplots(figsize=(9, 5))
    x = [max(_num(r["msgs_per_min"]), 0.0) for r in rows]
    if has_total:
        ax.scatter(x, [max(_num(r["total_ms_p50"]), 1e-3) for r in rows], s=6, alpha=0.35, color=TOTAL,
                   label="median pull time (total) per group/topic minute")  # fmt: skip
    ax.scatter(x, [max(_num(r[service]), 1e-3) for r in rows], s=6, alpha=0.35, color=SERVICE,
               label=f"{kind} service time per group/topic minute")  # fmt: skip
    if rates.rows and rates.has("msgs_per_min", service):
        buckets = rates.dicts()
        bx = [max(_num(b["msgs_per_min"]), 0.0) for b in buckets]
        if has_total and rates.has("total_ms_p50"):
            ax.plot(bx, [max(_num(b["total_ms_p50"]), 1e-3) for b in buckets], "o-", color=TOTAL, lw=2,
                    label="median pull time, by rate bucket")  # fmt: skip
        ax.plot(bx, [max(_num(b[service]), 1e-3) for b in buckets], "o-", color=SERVICE, lw=2,
                label=f"{kind} service time, by rate bucket")  # fmt: skip
    ax.set_xscale("symlog", linthresh=1)
    ax.set_yscale("log")
    ax.set_xlabel("messages returned per minute (arrival rate)")
    ax.set_ylabel("ms")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    caption = (
        "Each dot is one group/topic minute. At low arrival rates pulls are held until a message comes or the "
        "suspend timeout ends them, so pull time rises toward the timeout; service time stays flat."
        if has_total
        else "Each dot is one group/topic minute. stats.log has no hold time, so only the service time the broker "
        "measured for pulls that returned messages (GROUP_GET_LATENCY) is shown."
    )
    return ("Arrival rate vs pull time", caption, _png(fig))


def chart_timeline(by_minute: Table, top: int = 6):
    if not by_minute.rows or not by_minute.has("window_start", "msgs_per_min"):
        return None
    series: dict[str, list[dict]] = defaultdict(list)
    for r in by_minute.dicts():
        series[_label(r)].append(r)
    weight = "pulls" if by_minute.has("pulls") else "msgs"
    chosen = sorted(series, key=lambda k: -sum(_num(r[weight]) for r in series[k]))[:top]
    has_total = by_minute.has("total_ms_p50")
    fig, axes = plt.subplots(2, 1, figsize=(10, 6.5), sharex=True)
    for label in chosen:
        points = sorted(series[label], key=lambda r: r["window_start"])
        times = [r["window_start"] for r in points]
        axes[0].plot(times, [_num(r["msgs_per_min"]) for r in points], lw=1, label=label)
        metric = "total_ms_p50" if has_total else "service_ms_mean"
        axes[1].plot(times, [max(_num(r[metric]), 1e-3) for r in points], lw=1, label=label)
    axes[0].set_ylabel("messages / minute")
    axes[0].set_yscale("symlog", linthresh=1)
    axes[1].set_ylabel("median pull time, ms" if has_total else "mean service time, ms")
    axes[1].set_yscale("log")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7, ncol=2)
    fig.autofmt_xdate()
    return (
        "Traffic and pull time by minute",
        (f"The {len(chosen)} busiest group/topics. Quiet minutes show as long pulls (held to the suspend timeout); "
        "bursts bring pull time down to the service time."),
        _png(fig),
    )


def chart_wakes(group_topic: Table):
    wakes = [w for w in WAKE_COLOURS if f"wake_{w}_share" in group_topic.columns]
    if not group_topic.rows or not wakes:
        return None
    rows = sorted(group_topic.dicts(), key=lambda r: _label(r), reverse=True)
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(rows) + 1.2))
    left = [0.0] * len(rows)
    for w in wakes:
        share = [_num(r[f"wake_{w}_share"]) for r in rows]
        share = [0.0 if math.isnan(s) else s for s in share]
        ax.barh([_label(r) for r in rows], share, left=left, color=WAKE_COLOURS[w], label=w)
        left = [a + b for a, b in zip(left, share, strict=True)]
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of pulls")
    ax.legend(ncol=len(wakes), fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.4 / (len(rows) + 2)))
    return (
        "How pulls ended",
        ("none: answered at once; arrival: held, woken by a message; timeout: held to its deadline; disconnect: "
        "the client went away while held; shutdown: answered as the server stopped."),
        _png(fig),
    )


def chart_overshoot(group_topic: Table):
    if not group_topic.has("overshoot_ms_p50", "overshoot_ms_p99", "overshoot_ms_max"):
        return None
    rows = [r for r in group_topic.dicts() if r["overshoot_ms_max"] is not None]
    if not rows:
        return None
    rows.sort(key=_label, reverse=True)
    labels = [_label(r) for r in rows]
    fig, ax = plt.subplots(figsize=(9, 0.5 * len(rows) + 1.2))
    y = range(len(rows))
    for offset, key, colour in ((-0.25, "overshoot_ms_p50", "#8da0cb"), (0, "overshoot_ms_p99", "#4c72b0"),
                                (0.25, "overshoot_ms_max", "#1f3b70")):  # fmt: skip
        ax.barh([i + offset for i in y], [_num(r[key]) for r in rows], height=0.25, color=colour,
                label=key.replace("overshoot_ms_", ""))  # fmt: skip
    ax.set_yticks(list(y), labels)
    ax.set_xlabel("ms past the deadline (hold - suspend_ms; short mode: hold - short polling time)")
    ax.axvline(0, color="black", lw=0.8)
    ax.legend(fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    return ("Timeout overshoot", "How late held pulls that timed out were answered, per group/topic.", _png(fig))


def chart_slowest(table: Table, what: str, key: Sequence[str], n: int = 10, by: str = "p99 service time"):
    if not table.rows or not (table.has("service_ms_p99") or table.has("service_ms_mean")):
        return None
    rows = table.dicts()[:n]
    metrics = [m for m in ("service_ms_p50", "service_ms_p99", "service_ms_max", "service_ms_mean") if table.has(m)]
    labels = [" / ".join(str(r[k]) for k in key) for r in rows][::-1]
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(rows) * max(1, len(metrics) / 2) + 1.2))
    height = 0.8 / len(metrics)
    for i, m in enumerate(metrics):
        ax.barh([j + i * height for j in range(len(rows))], [_num(r[m]) for r in rows][::-1], height=height,
                label=m.replace("service_ms_", ""))  # fmt: skip
    ax.set_yticks([j + 0.4 - height / 2 for j in range(len(rows))], labels, fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("service time, ms (hold excluded)")
    ax.legend(fontsize=8)
    ax.grid(axis="x", alpha=0.3, which="both")
    return (f"Slowest {what}", f"Ranked by {by}: real broker-side slowness, hold excluded.", _png(fig))


# ---------------------------------------------------------------------------------------------
# page


def _fmt(value: object, column: str = "") -> str:
    if value is None:
        return ""
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M")
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        if column.endswith("_share") or column == "hold_share_of_time":
            return f"{value:.1%}"
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.1f}"
    if isinstance(value, int) and not isinstance(value, bool) and not column.endswith("_id"):
        return f"{value:,}"
    return str(value)


def html_table(table: Table, columns: Sequence[str], limit: int = 50) -> str:
    columns = [c for c in columns if c in table.columns]
    if not table.rows:
        return "<p class=note>No rows.</p>"
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = []
    for row in table.dicts()[:limit]:
        cells = "".join(f"<td>{html.escape(_fmt(row[c], c))}</td>" for c in columns)
        body.append(f"<tr>{cells}</tr>")
    more = f"<p class=note>First {limit} of {len(table.rows)} rows; all are in the CSV.</p>" if len(table.rows) > limit else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{more}"


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1100px;color:#222;
padding:0 1em}h1{margin-bottom:0.2em}h2{margin-top:2em;border-bottom:1px solid #ddd;padding-bottom:0.2em}
.meta{color:#666}.note{color:#666;font-size:0.9em}img{max-width:100%}figure{margin:1em 0}
figcaption{color:#444;font-size:0.92em;margin-top:0.3em}table{border-collapse:collapse;font-size:0.82em;margin:0.5em 0}
th,td{border:1px solid #ddd;padding:3px 6px;text-align:right}th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}
.cards{display:flex;gap:1em;flex-wrap:wrap}.card{border:1px solid #ddd;border-radius:6px;padding:0.6em 1em;min-width:9em}
.card b{display:block;font-size:1.4em}dl{font-size:0.9em}dt{font-weight:600}dd{margin:0 0 0.5em 1em}
"""


def _figure(chart) -> str:
    title, caption, png = chart
    return (f"<h2>{html.escape(title)}</h2><figure><img alt=\"{html.escape(title)}\" src=\"data:image/png;base64,{png}\">"
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")  # fmt: skip


def _when(ms: object) -> str:
    if ms is None:
        return "-"
    return dt.datetime.fromtimestamp(int(ms) / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def page(title: str, cards: list[tuple[str, str]], sections: list[str], definitions: list[tuple[str, str]]) -> str:
    card_html = "".join(f"<div class=card><b>{html.escape(v)}</b>{html.escape(k)}</div>" for k, v in cards)
    defs = "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in definitions)
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{html.escape(title)}</title>"
        f"<style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>"
        f"<div class=cards>{card_html}</div>{''.join(sections)}<h2>Definitions</h2><dl>{defs}</dl></body></html>\n"
    )


GROUP_TOPIC_COLUMNS = [
    "group", "topic", "pulls", "held_share", "hold_share_of_time", "total_ms_p50", "total_ms_p99", "hold_ms_p50",
    "service_ms_p50", "service_ms_p99", "service_ms_max", "wake_arrival_share", "wake_timeout_share",
    "overshoot_ms_p99", "msgs", "bytes", "msgs_per_min",
]  # fmt: skip
RATE_COLUMNS = [
    "bucket", "group_topic_minutes", "pulls", "msgs_per_min", "held_share", "hold_share_of_time", "total_ms_p50",
    "total_ms_p90", "total_ms_p99", "service_ms_p50", "service_ms_p90", "service_ms_p99", "service_ms_mean",
]  # fmt: skip
SLOW_COLUMNS = ["rank", "group", "topic", "queue_id", "client", "groups", "pulls", "service_ms_p50", "service_ms_p90",
                "service_ms_p99", "service_ms_max", "service_ms_mean", "held_share"]  # fmt: skip

DEFINITIONS = [
    ("pull time (total)", ("arrival of the request to the response written: what the client sees as pull RT, less "
     "the network.")),
    ("hold", "time a pull waited for a message (held pulls only; percentiles of hold are over held pulls)."),
    ("service", "pull time outside the hold: reading the store and answering. The broker's own work."),
    ("held share", "share of pulls that were held. Hold share of time: sum of hold over sum of pull time."),
    ("timeout overshoot", ("for pulls that ended by timeout: hold minus the deadline they were held to, suspend_ms "
     "in long polling mode, the broker's short polling time (a job option, default 1000 ms) in short mode.")),
    ("arrival rate", "messages returned per minute to a group on a topic (what a consumer that keeps up receives)."),
]  # fmt: skip


def _no_table() -> Table:
    """A table a job did not produce (the page shows it empty)."""
    return Table([], [])


def _opening(
    summary: dict, group_topic: Table, counted: tuple[str, int], nothing: str
) -> tuple[list[tuple[str, str]], list[str]]:
    """What both report pages open with: cards (what was ``counted``, rejects, group/topics, time
    span) and, when no group/topic had data, the section saying so (``nothing``)."""
    label, count = counted
    cards = [
        (label, f"{count:,}"),
        ("rejected lines", f"{summary.get('rejected', 0):,}"),
        ("group/topics", f"{len(group_topic.rows):,}"),
        ("from", _when(summary.get("first_ts_ms"))),
        ("to", _when(summary.get("last_ts_ms"))),
    ]
    return cards, [] if group_topic.rows else [nothing]


def render_hold_report(summary: dict, tables: Mapping[str, tuple[list[str], list[tuple]]]) -> str:
    """The hold_report page, from its tables' (columns, rows) by name."""
    tables = _tables(tables)
    gt, minute, rates = tables["group_topic"], tables["by_minute"], tables["rate_vs_pull_time"]
    cards, sections = _opening(summary, gt, ("events", summary.get("events", 0)),
                               "<h2>No events</h2><p>The input held no valid pull events.</p>")  # fmt: skip
    charts = [
        chart_time_split(gt),
        chart_rate_vs_rt(minute, rates),
        chart_timeline(minute),
        chart_wakes(gt),
        chart_overshoot(gt),
        chart_slowest(tables["slowest_queues"], "queues", ("group", "topic", "queue_id")),
        chart_slowest(tables["slowest_clients"], "clients", ("client",)),
    ]
    sections += [_figure(c) for c in charts if c is not None]
    sections.append("<h2>Per group and topic</h2>" + html_table(gt, GROUP_TOPIC_COLUMNS))
    sections.append("<h2>Arrival rate vs pull time</h2>" + html_table(rates, RATE_COLUMNS))
    sections.append("<h2>Slowest queues</h2>" + html_table(tables["slowest_queues"], SLOW_COLUMNS))
    sections.append("<h2>Slowest clients</h2>" + html_table(tables["slowest_clients"], SLOW_COLUMNS))
    if summary.get("rejected"):
        reasons = ", ".join(f"{k}: {v:,}" for k, v in summary.get("rejected_by_reason", {}).items())
        sections.append(f"<h2>Rejected lines</h2><p>{html.escape(reasons)} (each line is in rejects/).</p>")
    k = summary.get("options", {}).get("sketch_k", DEFAULT_SKETCH_K)
    percentiles = ("percentiles", (f"from KLL sketches of size {k}: the value at percentile p is one of the values, "
                   f"and its rank is within {rank_error(k):.2%} of n of p*n among the n values (99% confidence; "
                   f"exact for up to {k} values). Windows and dates are UTC, by the time the answer was written."))  # fmt: skip
    return page("rmqproxy pull/hold report", cards, sections, [*DEFINITIONS, percentiles])


STATS_DEFINITIONS = [
    ("source", ("the per-minute 'Stats In One Minute' lines of an Apache RocketMQ broker's stats.log "
     "(StatsItem.printAtMinutes / RTStatsItem, rocketmq-all-4.9.8).")),
    ("found pulls", ("pulls that returned messages: GROUP_GET_LATENCY TIMES, else GROUP_GET_NUMS SUM / AVGPT. "
     "The broker counts neither pulls that found nothing nor hold time.")),
    ("service time", ("GROUP_GET_LATENCY AVGRT: ms from the start of PullMessageProcessor.processRequest to the "
     "messages read into the response (transferMsgByHeap); a re-run after a hold starts the clock anew, so hold "
     "is excluded. Averages only: stats.log has no percentiles.")),
    ("minute", "each line covers the minute before the one it is printed at (10 s samples, first to last)."),
]  # fmt: skip


def render_stats_report(summary: dict, tables: Mapping[str, tuple[list[str], list[tuple]]]) -> str:
    """The stats_log page: the same layout with what a stats.log has."""
    tables = _tables(tables)
    gt, minute, rates = tables["group_topic"], tables["by_minute"], tables["rate_vs_pull_time"]
    nothing = "<h2>No pull statistics</h2><p>The input held no GROUP_GET_* minute lines.</p>"
    cards, sections = _opening(summary, gt, ("stats lines used", summary.get("lines_used", 0)), nothing)
    charts = [
        chart_rate_vs_rt(minute, rates),
        chart_timeline(minute),
        chart_slowest(tables["slowest_queues"], "queues", ("group", "topic", "queue_id"), by="mean service time"),
    ]
    sections += [_figure(c) for c in charts if c is not None]
    sections.append(
        "<p class=note>Not in stats.log, so not shown: hold time and its share, wake reasons, timeout overshoot, "
        "pulls that found nothing, percentiles, clients.</p>"
    )
    sections.append("<h2>Per group and topic</h2>" + html_table(gt, ["group", "topic", "found_pulls", "msgs", "bytes",
                    "msgs_per_min", "service_ms_mean", "service_ms_max_minute"]))  # fmt: skip
    sections.append("<h2>Arrival rate vs service time</h2>" + html_table(rates, ["bucket", "group_topic_minutes",
                    "found_pulls", "msgs_per_min", "service_ms_mean"]))  # fmt: skip
    sections.append("<h2>Slowest queues</h2>" + html_table(tables["slowest_queues"], ["rank", "group",
                    "topic", "queue_id", "found_pulls", "service_ms_mean", "service_ms_max_minute"]))  # fmt: skip
    put = tables["topic_put"]
    if put.rows:
        sections.append("<h2>Messages put per topic</h2>" + html_table(put, ["topic", "put_msgs", "put_bytes",
                        "put_msgs_per_min"]))  # fmt: skip
    return page("RocketMQ broker stats.log report", cards, sections, STATS_DEFINITIONS)
