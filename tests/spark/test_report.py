"""The report pages render from whatever tables a job produced, without Spark."""

from __future__ import annotations

import datetime as dt
import math
import re

from spark_jobs import report


def test_both_pages_say_so_when_there_is_nothing_to_show() -> None:
    hold = report.render_hold_report({"events": 0, "rejected": 3}, {})
    stats = report.render_stats_report({"lines_used": 0}, {"group_topic": report.Table(["group"], [])})
    assert "No events" in hold and "rejected lines" in hold and ">3<" in hold
    assert "No pull statistics" in stats and "stats lines used" in stats


def test_a_page_with_data_has_no_empty_notice_and_counts_its_group_topics() -> None:
    columns = ["group", "topic", "pulls"]
    page = report.render_hold_report({"events": 1234}, {"group_topic": report.Table(columns, [("g", "t", 2)])})
    assert "No events" not in page and "1,234" in page


# ---------------------------------------------------------------------------------------------
# time charts: a resolution that fits the span, one small panel per group/topic

T0 = dt.datetime(2024, 5, 13, 20, 0)
WINDOW = ["group", "topic", "window_start", "pulls", "msgs", "total_ms_sum", "service_ms_sum", "msgs_per_min",
          "total_ms_p50", "service_ms_p50"]  # fmt: skip


def _minutes(span_minutes: int, groups: tuple[str, ...] = ("g1", "g2")) -> report.Table:
    """A by_minute table: each group pulls 4 times a minute, 2 msgs, one 15 s hold."""
    rows = [(g, "t", T0 + dt.timedelta(minutes=m), 4, 2, 15_003.0, 3.0, 2.0, 1.0, 0.75)
            for m in range(span_minutes) for g in groups]  # fmt: skip
    return report.Table(WINDOW, rows)


def test_time_charts_are_by_minute_for_hours_by_hour_for_days_by_day_for_weeks() -> None:
    assert report.timeline_resolution(_minutes(60)) == ("minute", 60_000)
    assert report.timeline_resolution(_minutes(180)) == ("minute", 60_000)
    assert report.timeline_resolution(_minutes(181)) == ("hour", 3_600_000)
    assert report.timeline_resolution(_minutes(38 * 60, ("g1",))) == ("hour", 3_600_000)
    weeks = report.Table(WINDOW, [("g", "t", T0, 1, 1, 1.0, 1.0, 1.0, 1.0, 1.0),
                                  ("g", "t", T0 + dt.timedelta(days=20), 1, 1, 1.0, 1.0, 1.0, 1.0, 1.0)])  # fmt: skip
    assert report.timeline_resolution(weeks) == ("day", 86_400_000)
    assert report.timeline_resolution(report.Table(WINDOW, [])) is None


def test_minutes_sum_into_hours_with_means_weighted_by_pulls() -> None:
    rows = [
        ("g", "t", T0, 1, 0, 15_000.0, 0.5, 0.0, None, None),  # one held pull, nothing came
        ("g", "t", T0 + dt.timedelta(minutes=59), 3, 360, 3.0, 1.5, 360.0, None, None),  # a burst
        ("g", "t", T0 + dt.timedelta(minutes=60), 2, 7200, 4.0, 4.0, 7200.0, None, None),
    ]
    series = report.timeline_series(report.Table(WINDOW, rows), 3_600_000)["g / t"]
    assert series.starts == [round(T0.replace(tzinfo=dt.UTC).timestamp() * 1000) + h * 3_600_000 for h in (0, 1)]
    assert series.msgs_per_s == [0.1, 2.0]
    assert series.pull_ms == [15_003.0 / 4, 2.0]  # not the mean of the minutes' means (7501.5)
    assert series.service_ms == [0.5, 2.0]
    # stats.log's tables: a mean service time per found pull, no pull time
    stats = report.Table(["group", "topic", "window_start", "found_pulls", "msgs", "service_ms_mean"],
                         [("g", "t", T0, 1, 5, 1.0), ("g", "t", T0 + dt.timedelta(minutes=1), 3, 5, 3.0),
                          ("g", "t", T0 + dt.timedelta(minutes=2), 0, 0, None)])  # fmt: skip
    series = report.timeline_series(stats, 3_600_000)["g / t"]
    assert series.service_ms == [2.5] and math.isnan(series.pull_ms[0]) and series.msgs_per_s == [10 / 3600]


def test_a_38_hour_span_is_drawn_by_hour_from_the_hour_table_one_panel_per_group() -> None:
    minutes = _minutes(38 * 60, ("g1", "g2", "g3"))
    hours = report.Table(WINDOW, [(g, "t", T0 + dt.timedelta(hours=h), 240, 120, 900_180.0, 180.0, 2.0, 1.0, 0.75)
                                  for h in range(38) for g in ("g1", "g2", "g3")])  # fmt: skip
    chart = report.chart_timeline(minutes, hours, top=2)
    assert chart.title == "Traffic and pull time by hour" and chart.wide and len(chart.images) == 2
    assert chart.caption.startswith("38 h of data, a point per hour. Pull time far above service time")
    assert chart.caption.endswith("The 2 busiest of 3 group/topics.")
    assert [i.alt for i in chart.images] == [f"g{i} / t: traffic and pull time per hour" for i in (1, 2)]
    assert "msgs/s" not in chart.legend and "messages per second" in chart.legend and "ms" in chart.legend
    # without an hour table the minutes are summed into hours: the same chart
    assert report.chart_timeline(minutes, None, top=2).title == "Traffic and pull time by hour"
    short = report.chart_timeline(_minutes(90), report.Table(WINDOW, []))
    assert short.title == "Traffic and pull time by minute" and short.caption.startswith("90 min of data, a point per")


def test_the_page_shrinks_to_a_phone_and_every_chart_says_what_to_look_for() -> None:
    columns = ["group", "topic", "pulls", "hold_ms_sum", "service_ms_sum", "total_ms_sum", "wake_arrival_share",
               "wake_timeout_share"]  # fmt: skip
    tables = {
        "group_topic": report.Table(columns, [("g1", "t", 8, 60_000.0, 4.0, 60_004.0, 0.5, 0.5)]),
        "by_minute": _minutes(240, ("g1",)),
    }
    page = report.render_hold_report({"events": 8}, tables)
    assert '<meta name=viewport content="width=device-width,initial-scale=1">' in page
    assert "img{max-width:100%;height:auto" in page and "overflow-x:auto" in page
    assert "<div class=scroll><table>" in page
    # no width or minimum width in the CSS that a phone is narrower than; grid columns are min(100%, N px)
    css = page.split("<style>")[1].split("</style>")[0]
    assert all(int(px) <= 390 for px in re.findall(r"(?<![\w-])(?:min-)?width:(\d+)px", css))
    assert re.findall(r"minmax\((.*?),", css) == ["min(100%", "min(100%"]
    figures = re.findall(r"<figure.*?</figure>", page)
    assert len(figures) == 4  # time split, how pulls ended, the timeline (one panel), arrival rate
    for figure in figures:
        caption = re.search(r"<figcaption>(.+?)</figcaption>", figure).group(1)
        assert 40 < len(caption) < 260 and "\n" not in caption
        for width, height in re.findall(r"<img alt=\"[^\"]+\" width=(\d+) height=(\d+) ", figure):
            assert 0 < int(width) <= 520 and int(height) > 0
    assert "Traffic and pull time by hour" in page
