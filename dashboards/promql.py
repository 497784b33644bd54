"""Small PromQL builders shared by the dashboards and the alert rules.

Only string assembly: selectors, ``rate``, aggregations and histogram quantiles, so every panel
writes a quantile the same way (``sum by (le, ...)`` of a rate, then ``histogram_quantile``).
``RATE`` is Grafana's ``$__rate_interval`` (at least four scrape intervals); alert rules pass a
fixed window instead.
"""

from __future__ import annotations

from collections.abc import Iterable

RATE = "$__rate_interval"


def sel(series: str, *matchers: str) -> str:
    """``series{m1,m2}``; matchers are written as PromQL has them (``'held="true"'``)."""
    return f"{series}{{{','.join(matchers)}}}" if matchers else series


def by(labels: Iterable[str]) -> str:
    return ", ".join(labels)


def rate(selector: str, window: str = RATE) -> str:
    return f"rate({selector}[{window}])"


def increase(selector: str, window: str = RATE) -> str:
    return f"increase({selector}[{window}])"


def sum_by(labels: Iterable[str], expr: str) -> str:
    labels = tuple(labels)
    return f"sum by ({by(labels)}) ({expr})" if labels else f"sum({expr})"


def avg_by(labels: Iterable[str], expr: str) -> str:
    return f"avg by ({by(labels)}) ({expr})"


def quantile(q: float, bucket_selector: str, labels: Iterable[str] = (), window: str = RATE) -> str:
    """The q-quantile of a histogram over ``window``, kept apart by ``labels``."""
    return f"histogram_quantile({q:g}, {sum_by(('le', *labels), rate(bucket_selector, window))})"


def mean(sum_selector: str, count_selector: str, labels: Iterable[str] = (), window: str = RATE) -> str:
    """Mean observation of a histogram over ``window`` (sum rate over count rate)."""
    labels = tuple(labels)
    return f"{sum_by(labels, rate(sum_selector, window))} / {sum_by(labels, rate(count_selector, window))}"
