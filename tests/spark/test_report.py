"""The report pages render from whatever tables a job produced, without Spark."""

from __future__ import annotations

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
