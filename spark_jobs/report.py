"""The HTML report: one self-contained file (charts as embedded PNGs, no scripts, no links out).

Input is plain Python: the summary dict and the small summary tables the jobs already collected
(``Table(columns, rows)``), so this module needs neither Spark nor a session and renders the
same way for ``hold_report`` (rmqproxy event logs) and ``stats_log`` (an Apache broker's
stats.log, which lacks hold times: charts whose columns are missing are left out, with a note).
Charts are drawn with matplotlib's Agg backend.

A page a person reads, at a desk or on a phone:
- every chart has units on its axes and a one-line caption saying what to look for;
- time charts use a resolution that fits the span (``timeline_resolution``: by minute up to 3 h,
  by hour up to 14 days, by day beyond) and draw one small panel per group/topic, all on the same
  time axis, instead of many lines on one axis;
- the page shrinks with the window: charts are PNGs drawn at 1.5x for sharpness, each as wide as
  its cell of a grid that goes to one column on a narrow screen (``img{max-width:100%}``); wide
  tables scroll inside their own box, so the page itself never scrolls sideways
  (tests/spark/test_report_layout.py checks it in headless Chromium at 390 and 1400 px).
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import io
import math
import struct
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates
import matplotlib.pyplot as plt
import matplotlib.transforms as mtransforms
from matplotlib.collections import PathCollection
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter, PercentFormatter

from .defaults import DEFAULT_SKETCH_K, rank_error

HOLD = "#4c72b0"
SERVICE = "#dd8452"
TOTAL = "#55a868"
TRAFFIC = "#9aa5b1"
SERVICE_SHADES = {"service_ms_p50": "#f2c4a2", "service_ms_mean": "#f2c4a2", "service_ms_p99": "#dd8452",
                  "service_ms_max": "#8a3b12"}  # fmt: skip
WAKE_COLOURS = {"none": "#8c8c8c", "arrival": "#55a868", "timeout": "#4c72b0", "disconnect": "#c44e52",
                "shutdown": "#8172b3", "other": "#ccb974"}  # fmt: skip

#: Charts are drawn at DPI and shown at 96 per inch (CSS px): sharp on high-density screens and
#: when zoomed, the same size as a 96 dpi drawing on the page.
DPI = 144
#: Figure sizes, inches at 96 CSS px each: a chart about one column of the two-column grid of a
#: desktop window (shown stretched to it) or a phone's width; a small-multiple panel one of three.
CHART_WIDTH = 4.8
PANEL_SIZE = (3.6, 2.6)
MINUTE_MS, HOUR_MS, DAY_MS = 60_000, 3_600_000, 86_400_000
#: (name, bucket ms, longest span drawn at it): at most ~180-340 points per line.
RESOLUTIONS = (("minute", MINUTE_MS, 3 * HOUR_MS), ("hour", HOUR_MS, 14 * DAY_MS), ("day", DAY_MS, math.inf))

#: matplotlib settings the pages' charts are drawn with (``plt.rc_context``).
STYLE = {"font.size": 9, "axes.titlesize": 9, "axes.labelsize": 9, "legend.fontsize": 8, "axes.spines.top": False,
         "axes.spines.right": False}  # fmt: skip


class Table(NamedTuple):
    columns: list[str]
    rows: list[tuple]

    def has(self, *names: str) -> bool:
        return all(n in self.columns for n in names)

    def dicts(self) -> list[dict]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


class Image(NamedTuple):
    """A PNG (base64) and the size it is shown at, CSS px."""

    png: str
    width: int
    height: int
    alt: str


class Chart(NamedTuple):
    """A chart section: its images (several for small multiples, shown as a grid), the one-line
    ``caption`` of what to look for, an optional HTML ``legend`` above the images and whether it
    takes the page's whole width (``wide``) or one column of the chart grid."""

    title: str
    caption: str
    images: list[Image]
    wide: bool = False
    legend: str = ""


def _tables(collected: Mapping[str, tuple[list[str], list[tuple]]]) -> defaultdict[str, Table]:
    """A job's collected (columns, rows) by table name as Tables; an absent one is empty."""
    return defaultdict(_no_table, {name: Table(*table) for name, table in collected.items()})


def _png(fig, alt: str, tight: bool = True) -> Image:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight" if tight else None, pad_inches=0.05)
    plt.close(fig)
    data = buf.getvalue()
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk
    scale = 96 / DPI
    return Image(base64.b64encode(data).decode(), round(width * scale), round(height * scale), alt)


def _label(row: dict) -> str:
    return f"{row['group']} / {row['topic']}"


def _num(value: object) -> float:
    return float("nan") if value is None else float(value)


def _epoch_ms(value: object) -> int:
    """A window start (a datetime, naive ones in UTC as the jobs' session time zone is, or epoch ms) as epoch ms."""
    if isinstance(value, dt.datetime):
        return round((value if value.tzinfo else value.replace(tzinfo=dt.UTC)).timestamp() * 1000)
    if isinstance(value, str):
        return _epoch_ms(dt.datetime.fromisoformat(value))
    return int(value)


def _utc(ms: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC)


def _swatches(items: Sequence[tuple[str, str]]) -> str:
    """An HTML legend: a coloured square and its text per (colour, text)."""
    return "<p class=legend>" + "".join(
        f"<span><i style=\"background:{c}\"></i>{html.escape(t)}</span>" for c, t in items
    ) + "</p>"  # fmt: skip


def _plain(value: float, _position: object = None) -> str:
    """A log axis's tick as a plain number: 0.01, 0.5, 10, 2k, 15k."""
    if value >= 1000:
        return f"{value / 1000:g}k"
    return f"{value:g}"


def _log_axis(axis, values: Sequence[float], low_floor: float = 1e-3) -> None:
    """A log scale over the positive ``values`` spanning at least a decade (so its ticks are
    powers of ten, labelled as plain numbers), with some room at both ends."""
    positive = [v for v in values if v > 0 and not math.isnan(v)]
    low, high = (min(positive), max(positive)) if positive else (0.1, 10.0)
    low, high = max(low / 1.6, low_floor), high * 1.6
    if high / low < 12:
        middle = math.sqrt(low * high)
        low, high = middle / math.sqrt(12), middle * math.sqrt(12)
    getattr(axis.axes, f"set_{axis.axis_name}scale")("log")
    getattr(axis.axes, f"set_{axis.axis_name}lim")(low, high)
    axis.set_major_formatter(FuncFormatter(_plain))
    axis.set_minor_formatter(FuncFormatter(_plain_minor) if high / low < 100 else NullFormatter())


def _plain_minor(value: float, _position: object = None) -> str:
    """On a log axis of two decades or less, 2x and 5x ticks labelled too."""
    mantissa = value / 10 ** math.floor(math.log10(value) + 1e-9)
    return _plain(value) if round(mantissa, 6) in (2.0, 5.0) else ""


def _panel_title(fig, label: str) -> None:
    """A panel's title across the top of its figure: smaller when long, cut in the middle when it
    still does not fit (the image's alt text has it whole)."""
    renderer = fig.canvas.get_renderer()
    limit = fig.bbox.width * 0.96
    text = fig.text(0.02, 0.985, label, ha="left", va="top", fontweight="bold", fontsize=9)
    for size in (9, 8.5, 8, 7.5, 7):
        text.set_fontsize(size)
        if text.get_window_extent(renderer).width <= limit:
            return
    keep = len(label)
    while keep > 8 and text.get_window_extent(renderer).width > limit:
        keep -= 1
        text.set_text(label[: keep // 2] + "\u2026" + label[len(label) - (keep - keep // 2) :])


# ---------------------------------------------------------------------------------------------
# charts: each returns a Chart, or None when its data is missing


def _duration_unit(seconds: float) -> tuple[float, str]:
    """A divisor and unit name that keep a sum of pull time readable (seconds to hours)."""
    if seconds >= 5 * 3600:
        return 3600.0, "hours"
    if seconds >= 300:
        return 60.0, "minutes"
    return 1.0, "seconds"


def _bar_rows(n: int, per_row: float = 0.46, extra: float = 0.9) -> tuple:
    """A figure and axes for ``n`` rows of horizontal bars, each labelled above (``_row_labels``):
    labels above rather than beside the bars leave the bars the figure's whole width, so a narrow
    chart stays legible on a phone."""
    return plt.subplots(figsize=(CHART_WIDTH, per_row * n + extra))


def _row_labels(ax, labels: Sequence[str], above: float) -> None:
    """Row ``i``'s label (rows from the bottom, bars centred on y = i) just above its bars, whose
    top is ``above`` over the centre; no y ticks."""
    ax.set_yticks([])
    ax.spines["left"].set_visible(False)
    place = mtransforms.blended_transform_factory(ax.transAxes, ax.transData)
    for y, label in enumerate(labels):
        ax.text(0, y + above + 0.04, label, transform=place, va="bottom", ha="left", fontsize=9)
    ax.set_ylim(-above - 0.1, len(labels) - 1 + above + 0.55)


def chart_time_split(group_topic: Table) -> Chart | None:
    if not group_topic.rows or not group_topic.has("hold_ms_sum", "service_ms_sum"):
        return None
    rows = sorted(group_topic.dicts(), key=lambda r: _num(r["total_ms_sum"]))
    hold = [_num(r["hold_ms_sum"]) / 1000 for r in rows]
    service = [_num(r["service_ms_sum"]) / 1000 for r in rows]
    total = [h + s for h, s in zip(hold, service, strict=True)]
    divisor, unit = _duration_unit(max(total, default=0.0))
    fig, ax = _bar_rows(len(rows))
    y = range(len(rows))
    ax.barh(y, [h / divisor for h in hold], height=0.4, color=HOLD, label="held (waiting for messages)")
    ax.barh(y, [s / divisor for s in service], height=0.4, left=[h / divisor for h in hold], color=SERVICE,
            label="service (broker working)")  # fmt: skip
    for i, (h, t) in enumerate(zip(hold, total, strict=True)):
        ax.text(t / divisor, i, f" {h / t if t > 0 else 0.0:.1%} held", va="center", fontsize=8)
    ax.set_xlim(0, (max(total, default=0.0) / divisor or 1.0) * 1.2)
    _row_labels(ax, [_label(r) for r in rows], 0.2)
    ax.set_xlabel(f"pull time, {unit} (sum over all pulls)")
    ax.legend(fontsize=8, frameon=False, ncol=2, loc="lower left", bbox_to_anchor=(0, 1.0), handlelength=1)
    ax.grid(axis="x", alpha=0.3)
    return Chart(
        "Where pull time goes",
        ("A large held share means consumers wait on empty queues (long polls, cheap), not a slow broker; the "
         "service part is the broker's own work."),
        [_png(fig, "Pull time per group/topic split into held and service time")],
    )  # fmt: skip


def chart_rate_vs_rt(by_minute: Table, rates: Table) -> Chart | None:
    service = "service_ms_p50" if by_minute.has("service_ms_p50") else "service_ms_mean"
    if not by_minute.rows or not by_minute.has("msgs_per_min", service):
        return None
    rows = by_minute.dicts()
    has_total = by_minute.has("total_ms_p50")
    kind = "median" if service.endswith("p50") else "mean"
    fig, ax = plt.subplots(figsize=(CHART_WIDTH, 3.6))
    x = [max(_num(r["msgs_per_min"]), 0.0) for r in rows]
    if has_total:
        ax.scatter(x, [max(_num(r["total_ms_p50"]), 1e-3) for r in rows], s=4, alpha=0.25, color=TOTAL,
                   linewidths=0, label="median pull time, one group/topic minute")  # fmt: skip
    ax.scatter(x, [max(_num(r[service]), 1e-3) for r in rows], s=4, alpha=0.25, color=SERVICE, linewidths=0,
               label=f"{kind} service time, one group/topic minute")  # fmt: skip
    if rates.rows and rates.has("msgs_per_min", service):
        buckets = rates.dicts()
        bx = [max(_num(b["msgs_per_min"]), 0.0) for b in buckets]
        if has_total and rates.has("total_ms_p50"):
            ax.plot(bx, [max(_num(b["total_ms_p50"]), 1e-3) for b in buckets], "o-", color=TOTAL, lw=2, ms=4,
                    label="median pull time, by rate bucket")  # fmt: skip
        ax.plot(bx, [max(_num(b[service]), 1e-3) for b in buckets], "o-", color=SERVICE, lw=2, ms=4,
                label=f"{kind} service time, by rate bucket")  # fmt: skip
    ax.set_xscale("symlog", linthresh=1)
    ax.xaxis.set_major_formatter(FuncFormatter(_plain))
    _log_axis(ax.yaxis, [v for line in ax.get_lines() for v in line.get_ydata()]
              + [v for dots in ax.collections for v in dots.get_offsets()[:, 1]])  # fmt: skip
    ax.set_xlabel("arrival rate, messages per minute (log scale)")
    ax.set_ylabel("ms (log scale)")
    ax.grid(alpha=0.3, which="major")
    legend = ax.legend(fontsize=7.5, frameon=False, loc="center left")
    for handle in legend.legend_handles:  # the dots' handles as solid as the lines'
        handle.set_alpha(1)
        if isinstance(handle, PathCollection):
            handle.set_sizes([18])
    caption = (
        "Pull time should fall toward service time as the arrival rate rises (fewer pulls wait); service time "
        "that climbs with the rate is the broker slowing under load."
        if has_total
        else "Service time that climbs with the arrival rate is the broker slowing under load; flat is healthy "
        "(stats.log has no hold time, so pull time is not shown)."
    )
    title = "Arrival rate vs pull time" if has_total else "Arrival rate vs service time"
    return Chart(title, caption, [_png(fig, "Pull and service time against arrival rate")])


def timeline_resolution(by_minute: Table) -> tuple[str, int] | None:
    """(name, bucket ms) of the time charts for the span of ``by_minute``'s windows: the finest of
    RESOLUTIONS whose longest span covers it; None without windows."""
    if not by_minute.rows or not by_minute.has("window_start"):
        return None
    column = by_minute.columns.index("window_start")
    starts = [_epoch_ms(r[column]) for r in by_minute.rows]
    span = max(starts) - min(starts) + MINUTE_MS
    return next((name, ms) for name, ms, longest in RESOLUTIONS if span <= longest)


class Series(NamedTuple):
    """One group/topic's time series at a resolution: bucket starts (epoch ms) and per bucket the
    messages per second, the mean pull time and the mean service time, ms (NaN: no pulls)."""

    starts: list[int]
    msgs_per_s: list[float]
    pull_ms: list[float]
    service_ms: list[float]


def timeline_series(table: Table, bucket_ms: int) -> dict[str, Series]:
    """Per group/topic label, the rows of a window table (``by_minute`` or ``by_hour``) summed into
    buckets of ``bucket_ms``. Means are weighted by pulls, so they are exact at any bucket size:
    mean pull time is total_ms_sum / pulls (rmqproxy's tables; mean of ``total_ms_mean`` weighted
    by pulls without the sum), mean service time likewise (stats.log's tables: ``service_ms_mean``
    weighted by found pulls). Buckets with no row are left out."""
    weight = next((c for c in ("pulls", "found_pulls") if table.has(c)), None)
    acc: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0] * 5))

    def part(row: dict, name: str, w: float) -> float | None:
        if table.has(f"{name}_ms_sum") and weight == "pulls":
            return None if row[f"{name}_ms_sum"] is None else float(row[f"{name}_ms_sum"])
        if table.has(f"{name}_ms_mean") and row[f"{name}_ms_mean"] is not None:
            return float(row[f"{name}_ms_mean"]) * w
        return None

    for row in table.dicts():
        start = _epoch_ms(row["window_start"])
        cell = acc[_label(row)][start - start % bucket_ms]
        cell[0] += float(row.get("msgs") or 0)
        w = float(row[weight] or 0) if weight else 0.0
        for i, name in ((1, "total"), (3, "service")):
            value = part(row, name, w)
            if value is not None and w > 0:
                cell[i] += value
                cell[i + 1] += w
    out = {}
    for label, cells in acc.items():
        starts = sorted(cells)
        values = [cells[s] for s in starts]
        out[label] = Series(
            starts,
            [v[0] / (bucket_ms / 1000) for v in values],
            [v[1] / v[2] if v[2] else float("nan") for v in values],
            [v[3] / v[4] if v[4] else float("nan") for v in values],
        )
    return out


def _weight(table: Table) -> str:
    return next((c for c in ("pulls", "found_pulls", "msgs") if table.has(c)), "")


def chart_timeline(by_minute: Table, by_hour: Table | None = None, top: int = 12) -> Chart | None:
    """Traffic and pull time over time, one small panel per group/topic (the ``top`` busiest),
    at ``timeline_resolution``: from ``by_minute``, or ``by_hour`` when the resolution is an hour
    or a day and it has rows (either summed into buckets by ``timeline_series``)."""
    resolution = timeline_resolution(by_minute)
    if resolution is None or not by_minute.has("msgs"):
        return None
    name, bucket_ms = resolution
    hourly = name != "minute" and by_hour is not None and by_hour.rows and by_hour.has("window_start", "msgs")
    series = timeline_series(by_hour if hourly else by_minute, bucket_ms)
    weight = _weight(by_minute)
    totals: dict[str, float] = defaultdict(float)
    for row in by_minute.dicts():
        totals[_label(row)] += _num(row[weight]) if weight and row[weight] is not None else 0.0
    chosen = sorted(series, key=lambda k: (-totals[k], k))[:top]
    first = min(s.starts[0] for s in series.values())
    last = max(s.starts[-1] for s in series.values()) + bucket_ms
    has_pull = any(not math.isnan(v) for k in chosen for v in series[k].pull_ms)
    what = "pull" if has_pull else "service"
    timed = [v for k in chosen for v in (*series[k].pull_ms, *series[k].service_ms)]
    span_h = (last - first) / HOUR_MS
    width_days = bucket_ms / DAY_MS
    images = []
    for label in chosen:
        s = series[label]
        fig = plt.figure(figsize=PANEL_SIZE)
        grid = fig.add_gridspec(2, 1, height_ratios=(1, 1.5), hspace=0.12, left=0.17, right=0.94, top=0.89,
                                bottom=0.17)  # fmt: skip
        traffic = fig.add_subplot(grid[0])
        times = fig.add_subplot(grid[1], sharex=traffic)
        traffic.bar([_utc(t) for t in s.starts], s.msgs_per_s, width=width_days, align="edge", color=TRAFFIC,
                    linewidth=0)  # fmt: skip
        traffic.set_ylim(0, max(max(s.msgs_per_s, default=0.0) * 1.15, 1e-9) if any(s.msgs_per_s) else 1)
        traffic.yaxis.set_major_locator(MaxNLocator(3))
        traffic.set_ylabel("msgs/s")
        _panel_title(fig, label)
        traffic.tick_params(labelbottom=False)
        middles = [_utc(t + bucket_ms / 2) for t in s.starts]
        style = {"lw": 1.3, "marker": "o" if len(s.starts) <= 48 else None, "ms": 2.5}
        if has_pull:
            times.plot(middles, s.pull_ms, color=TOTAL, **style)
        times.plot(middles, s.service_ms, color=SERVICE, **style)
        _log_axis(times.yaxis, timed)  # the same for every panel
        times.set_ylabel("ms (log)")
        times.grid(alpha=0.3, axis="y")
        traffic.set_xlim(_utc(first), _utc(last))
        locator = mdates.AutoDateLocator(minticks=3, maxticks=6)
        times.xaxis.set_major_locator(locator)
        times.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, show_offset=False))
        times.set_xlabel(f"UTC, per {name}", labelpad=1)
        images.append(_png(fig, f"{label}: traffic and {what} time per {name}", tight=False))
    legend = [(TRAFFIC, "messages per second (bars; each panel to its own scale)")]
    if has_pull:
        legend.append((TOTAL, "mean pull time, ms: what the client waits"))
    legend.append((SERVICE, "mean service time, ms: the broker's work (ms scales alike)"))
    more = f" The {len(chosen)} busiest of {len(series)} group/topics." if len(series) > len(chosen) else ""
    span = f"{span_h:.0f} h" if span_h >= 2 else f"{span_h * 60:.0f} min"
    look = (
        "Pull time far above service time while traffic is low is pulls held on empty queues, not a slow broker; "
        "service time rising with traffic is the broker under load."
        if has_pull
        else "Service time rising with traffic is the broker under load; flat is healthy."
    )
    caption = f"{span} of data, a point per {name}. {look}{more}"
    return Chart(f"Traffic and {what} time by {name}", caption, images, wide=True, legend=_swatches(legend))


def chart_wakes(group_topic: Table) -> Chart | None:
    wakes = [w for w in WAKE_COLOURS if f"wake_{w}_share" in group_topic.columns]
    if not group_topic.rows or not wakes:
        return None
    rows = sorted(group_topic.dicts(), key=lambda r: _label(r), reverse=True)
    fig, ax = _bar_rows(len(rows))
    left = [0.0] * len(rows)
    for w in wakes:
        share = [_num(r[f"wake_{w}_share"]) for r in rows]
        share = [0.0 if math.isnan(s) else s for s in share]
        ax.barh(range(len(rows)), share, height=0.4, left=left, color=WAKE_COLOURS[w], label=w)
        left = [a + b for a, b in zip(left, share, strict=True)]
    ax.set_xlim(0, 1)
    _row_labels(ax, [_label(r) for r in rows], 0.2)
    ax.xaxis.set_major_formatter(PercentFormatter(1))
    ax.set_xlabel("share of pulls, %")
    ax.legend(ncol=len(wakes), fontsize=8, frameon=False, loc="lower left", bbox_to_anchor=(0, 1.0),
              handlelength=1, columnspacing=0.9, handletextpad=0.4)  # fmt: skip
    return Chart(
        "How pulls ended",
        ("Arrival and timeout are long polling working; a disconnect share above a few % is clients dropping held "
         "pulls (restarts, network)."),
        [_png(fig, "Share of pulls by how they ended, per group/topic")],
    )  # fmt: skip


def chart_overshoot(group_topic: Table) -> Chart | None:
    if not group_topic.has("overshoot_ms_p50", "overshoot_ms_p99", "overshoot_ms_max"):
        return None
    rows = [r for r in group_topic.dicts() if r["overshoot_ms_max"] is not None]
    if not rows:
        return None
    rows.sort(key=_label, reverse=True)
    fig, ax = _bar_rows(len(rows), per_row=0.5)
    y = range(len(rows))
    for offset, key, colour in ((0.18, "overshoot_ms_p50", "#8da0cb"), (0, "overshoot_ms_p99", "#4c72b0"),
                                (-0.18, "overshoot_ms_max", "#1f3b70")):  # fmt: skip
        ax.barh([i + offset for i in y], [_num(r[key]) for r in rows], height=0.18, color=colour,
                label=key.replace("overshoot_ms_", ""))  # fmt: skip
    _row_labels(ax, [_label(r) for r in rows], 0.27)
    ax.set_xlabel("ms past the deadline (timed-out pulls)")
    ax.axvline(0, color="black", lw=0.8)
    ax.legend(fontsize=8, frameon=False, ncol=3, loc="lower left", bbox_to_anchor=(0, 1.0), handlelength=1)
    ax.grid(axis="x", alpha=0.3)
    return Chart(
        "Timeout overshoot",
        "p99 within a few ms of zero means held pulls time out on time; tens of ms or more means late timers "
        "(an overloaded server).",
        [_png(fig, "How late timed-out pulls were answered, per group/topic")],
    )  # fmt: skip


def chart_slowest(
    table: Table, what: str, key: Sequence[str], n: int = 10, by: str = "p99 service time"
) -> Chart | None:
    if not table.rows or not (table.has("service_ms_p99") or table.has("service_ms_mean")):
        return None
    rows = table.dicts()[:n][::-1]
    percentiles = ("service_ms_p50", "service_ms_p99", "service_ms_max")
    metrics = [m for m in (percentiles if table.has("service_ms_p99") else ("service_ms_mean", "service_ms_max"))
               if table.has(m)]  # fmt: skip
    fig, ax = _bar_rows(len(rows), per_row=0.3 + 0.07 * len(metrics))
    height = 0.54 / len(metrics)
    for i, m in enumerate(metrics):
        offset = ((len(metrics) - 1) / 2 - i) * height
        ax.barh([j + offset for j in range(len(rows))], [_num(r[m]) for r in rows], height=height,
                color=SERVICE_SHADES[m], label=m.replace("service_ms_", ""))  # fmt: skip
    _row_labels(ax, [" / ".join(str(r[k]) for k in key) for r in rows], 0.28)
    _log_axis(ax.xaxis, [_num(r[m]) for r in rows for m in metrics])
    ax.set_xlabel("service time, ms (log scale; hold excluded)")
    ax.legend(fontsize=8, frameon=False, ncol=len(metrics), loc="lower left", bbox_to_anchor=(0, 1.0),
              handlelength=1)  # fmt: skip
    ax.grid(axis="x", alpha=0.3, which="major")
    return Chart(
        f"Slowest {what}",
        f"Ranked by {by}. One far above the rest is real broker-side slowness there (cold reads, a slow disk or "
        "client link): hold is excluded.",
        [_png(fig, f"Service time of the slowest {what}")],
    )  # fmt: skip


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
    table_html = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    return f"<div class=scroll>{table_html}</div>{more}"


CSS = """
*,*::before,*::after{box-sizing:border-box}
body{font:15px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5em auto;max-width:1140px;color:#222;
padding:0 1em}h1{font-size:1.6em;margin:0 0 0.4em}h2{font-size:1.15em;margin:1.6em 0 0.5em;border-bottom:1px solid #ddd;
padding-bottom:0.2em}.note{color:#666;font-size:0.9em}img{max-width:100%;height:auto;display:block}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,480px),1fr));gap:0 2em;align-items:start}
.chart{margin:0;min-width:0}.chart.wide{grid-column:1/-1}.chart img{width:100%}
.panels{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,300px),1fr));gap:0.6em 1em}
figcaption{color:#444;font-size:0.92em;margin-top:0.4em}.legend{margin:0 0 0.5em;font-size:0.88em;color:#444}
.legend span{display:inline-block;margin-right:1.2em}.legend i{display:inline-block;width:0.8em;height:0.8em;
margin-right:0.35em;border-radius:2px;vertical-align:-0.05em}.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;font-size:0.82em;margin:0.5em 0}th,td{border:1px solid #ddd;padding:3px 6px;
text-align:right;white-space:nowrap}th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}
.cards{display:flex;gap:0.6em;flex-wrap:wrap}.card{border:1px solid #ddd;border-radius:6px;padding:0.5em 0.9em;
flex:1 1 9em}.card b{display:block;font-size:1.25em}dl{font-size:0.9em}dt{font-weight:600}dd{margin:0 0 0.5em 1em}
"""


def _img(image: Image) -> str:
    return (f"<img alt=\"{html.escape(image.alt)}\" width={image.width} height={image.height} "
            f"src=\"data:image/png;base64,{image.png}\">")  # fmt: skip


def _figure(chart: Chart) -> str:
    """A chart as a figure of the chart grid: title, legend, image(s), caption."""
    images = "".join(_img(i) for i in chart.images)
    if len(chart.images) > 1:
        images = f"<div class=panels>{images}</div>"
    return (f"<figure class=\"chart{' wide' if chart.wide else ''}\"><h2>{html.escape(chart.title)}</h2>"
            f"{chart.legend}{images}<figcaption>{html.escape(chart.caption)}</figcaption></figure>")  # fmt: skip


def _charts(charts: Sequence[Chart | None]) -> str:
    """The charts there are data for, in a grid: two columns on a wide window, one on a narrow one."""
    shown = [_figure(c) for c in charts if c is not None]
    return f"<div class=charts>{''.join(shown)}</div>" if shown else ""


def _when(ms: object) -> str:
    if ms is None:
        return "-"
    return dt.datetime.fromtimestamp(int(ms) / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def page(title: str, cards: list[tuple[str, str]], sections: list[str], definitions: list[tuple[str, str]]) -> str:
    card_html = "".join(f"<div class=card><b>{html.escape(v)}</b>{html.escape(k)}</div>" for k, v in cards)
    defs = "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in definitions)
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        "<meta name=viewport content=\"width=device-width,initial-scale=1\">"
        f"<title>{html.escape(title)}</title>"
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
    with plt.rc_context(STYLE):
        charts = [
            chart_time_split(gt),
            chart_wakes(gt),
            chart_timeline(minute, tables["by_hour"]),
            chart_rate_vs_rt(minute, rates),
            chart_overshoot(gt),
            chart_slowest(tables["slowest_queues"], "queues", ("group", "topic", "queue_id")),
            chart_slowest(tables["slowest_clients"], "clients", ("client",)),
        ]
    sections.append(_charts(charts))
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
    with plt.rc_context(STYLE):
        charts = [
            chart_timeline(minute, tables["by_hour"]),
            chart_rate_vs_rt(minute, rates),
            chart_slowest(tables["slowest_queues"], "queues", ("group", "topic", "queue_id"), by="mean service time"),
        ]
    sections.append(_charts(charts))
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
