"""The report as a person sees it: a generated multi-hour log's report.html in headless Chromium.

At a phone's width (390 CSS px, mobile emulation, so the viewport meta tag counts) and a desktop
window's (1400 px), the page must not scroll sideways, every chart must be drawn inside the
window, and the time charts must be by hour (one small panel per group/topic) for a span of hours.

Chromium is driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``: JSON
messages ending in NUL on file descriptors 3 and 4), so no websocket library is needed, and the
viewport is exactly the width asked for (a headless window is never narrower than 500 px).
Chromium is Debian's ``chromium`` (installed by .ci/run); without it the test skips, or fails
under CI.

The README's screenshots come from here too:

    .venv/bin/python -m tests.spark.test_report_layout docs/

generates 38 h of events (``sample_log``), runs hold_report on them and writes
docs/report-1400.png and docs/report-390.png.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import fcntl
import itertools
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from spark_jobs import generate, report
from tests.needs import skip_or_fail

HOUR_MS = 3_600_000
READ_TIMEOUT_S = 60
#: Chromium's flags for a closed network: no background connections, no first-run work.
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
    "--disable-background-networking", "--disable-component-update", "--disable-extensions", "--hide-scrollbars",
    "--mute-audio", "--remote-debugging-pipe",
)  # fmt: skip
#: What the page says of its layout once loaded: the document's width against the window's, and
#: every image's right edge, width shown and natural width (0: not decoded).
MEASURE = """JSON.stringify({
  inner: innerWidth, scroll: document.documentElement.scrollWidth, height: document.documentElement.scrollHeight,
  images: [...document.images].map(i => ({alt: i.alt, right: i.getBoundingClientRect().right,
                                           width: i.getBoundingClientRect().width, natural: i.naturalWidth})),
})"""


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


#: argv: fd in, fd out, command: the fds as 3 and 4, then exec the command.
PLACE_FDS = (
    "import os, sys; os.dup2(int(sys.argv[1]), 3); os.dup2(int(sys.argv[2]), 4); os.execv(sys.argv[3], sys.argv[3:])"
)


def _above(fd: int, lowest: int) -> int:
    """``fd`` moved to the lowest free descriptor >= ``lowest``."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, lowest)
    os.close(fd)
    return moved


class Browser:
    """One headless Chromium, one tab, driven over the DevTools protocol on a pipe."""

    def __init__(self, binary: str) -> None:
        self._profile = tempfile.mkdtemp(prefix="report-layout-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # The protocol pipe is fds 3 (in) and 4 (out) of the browser. A small Python puts them there
        # and execs it (no preexec_fn: the test process runs Spark's threads; not sh: dash takes
        # single-digit fds only), from fds of 10 and up, so neither dup2 overwrites the other's source.
        to_browser_r, from_browser_w = (_above(fd, 10) for fd in (to_browser_r, from_browser_w))
        command = [binary, *CHROMIUM_FLAGS, f"--user-data-dir={self._profile}", "about:blank"]
        self._process = subprocess.Popen(
            [sys.executable, "-c", PLACE_FDS, str(to_browser_r), str(from_browser_w), *command],
            pass_fds=(to_browser_r, from_browser_w), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict] = []
        try:
            target = self.call("Target.createTarget", url="about:blank")["targetId"]
            self._session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            self.call("Page.enable", session=True)
        except BaseException:
            self.close()
            raise

    def _read(self) -> dict:
        while b"\0" not in self._buffer:
            if not select.select([self._from_browser], [], [], READ_TIMEOUT_S)[0]:
                raise RuntimeError(f"chromium said nothing for {READ_TIMEOUT_S} s")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed its DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, session: bool = False, **params: object) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self._session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self._events.append(reply)

    def _wait_for(self, method: str) -> None:
        while True:
            while self._events:
                if self._events.pop(0).get("method") == method:
                    return
            self._events.append(self._read())

    def load(self, url: str, width: int, height: int) -> dict:
        """Open ``url`` in a ``width`` x ``height`` viewport (a phone's, mobile, below 600 px) and
        return ``MEASURE`` once it has loaded."""
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width, height=height,
                  deviceScaleFactor=1, mobile=width < 600)  # fmt: skip
        self._events.clear()
        self.call("Page.navigate", session=True, url=url)
        self._wait_for("Page.loadEventFired")
        return self.evaluate(MEASURE)

    def evaluate(self, expression: str) -> dict:
        result = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        return json.loads(result["result"]["value"])

    def screenshot(self, path: Path, width: int, height: int) -> None:
        """The top ``height`` CSS px of the page, ``width`` wide, as a PNG."""
        shot = self.call("Page.captureScreenshot", session=True, format="png", captureBeyondViewport=True,
                         clip={"x": 0, "y": 0, "width": width, "height": height, "scale": 1})  # fmt: skip
        path.write_bytes(base64.b64decode(shot["data"]))

    def close(self) -> None:
        try:
            if self._process.poll() is None:
                self.call("Browser.close")
        except (RuntimeError, OSError):
            pass
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)
        shutil.rmtree(self._profile, ignore_errors=True)


def sample_profile(rate_scale: float, queues: int | None = None):
    """The generator's default groups and topics with every producer rate times ``rate_scale``
    (and ``queues`` queues per topic, if given): the same shapes (bursty, steady, rare and idle
    topics, a plain poller) over more hours per event."""
    topics, groups = generate.default_profile()
    scaled = [
        dataclasses.replace(t, queues=queues or t.queues, traffic=dataclasses.replace(
            t.traffic, on_rate=t.traffic.on_rate * rate_scale, off_rate=t.traffic.off_rate * rate_scale))
        for t in topics
    ]  # fmt: skip
    return scaled, groups


def sample_log(out: Path, hours: float, rate_scale: float, queues: int | None = None, seed: int = 7) -> int:
    """Write ``hours`` of generated events (``sample_profile``) under ``out``; returns how many."""
    profile = sample_profile(rate_scale, queues)
    end = generate.DEFAULT_START_MS + hours * HOUR_MS
    events = generate.events(10**9, seed=seed, profile=profile)
    n = sum(1 for _ in itertools.takewhile(lambda event: event[0] < end, events))
    generate.write(out, n, seed=seed, profile=profile)
    return n


def stats_page() -> str:
    """The stats.log report's page for six hours of two groups (its own charts and tables: no pull
    or hold time), rendered from tables made here: the page is all this test looks at."""
    start = dt.datetime(2024, 5, 14, 0, 0)
    minute_columns = ["group", "topic", "window_start", "found_pulls", "msgs", "bytes", "msgs_per_min",
                      "service_ms_mean"]  # fmt: skip
    minutes = [(f"{g}-consumer-group-with-a-long-name", "TopicTest", start + dt.timedelta(minutes=m), 30 + m % 7,
                60 + m % 50, 6000, 60.0 + m % 50, 0.2 + (m % 11) / 10) for m in range(360) for g in ("a", "b")]
    group_topic = ["group", "topic", "found_pulls", "msgs", "bytes", "msgs_per_min", "service_ms_mean",
                   "service_ms_max_minute"]  # fmt: skip
    queues = ["rank", "group", "topic", "queue_id", "found_pulls", "service_ms_mean", "service_ms_max_minute"]
    tables = {
        "by_minute": (minute_columns, minutes),
        "group_topic": (group_topic, [(g, "TopicTest", 12_000, 30_000, 3_000_000, 83.3, 0.7, 1.2)
                                      for g in sorted({m[0] for m in minutes})]),
        "rate_vs_pull_time": (["bucket", "group_topic_minutes", "found_pulls", "msgs_per_min", "service_ms_mean"],
                              [("10-99", 720, 24_000, 84.0, 0.7)]),
        "slowest_queues": (queues, [(i + 1, "a-consumer-group-with-a-long-name", "TopicTest", i, 3000, 1.0 - i / 10,
                                     1.5) for i in range(4)]),
    }  # fmt: skip
    return report.render_stats_report({"lines_used": 720}, tables)


def _check_layout(measured: dict, width: int) -> None:
    """No sideways scrolling; every chart drawn, inside the window and, on a phone, as wide as the
    page's column (one chart per row, not a shrunken desktop layout)."""
    assert measured["inner"] == width
    assert measured["scroll"] <= width, f"the page is {measured['scroll']} px wide in a {width} px window"
    assert measured["images"]
    for image in measured["images"]:
        assert image["natural"] > 0, f"{image['alt']} not drawn"
        assert image["right"] <= width, f"{image['alt']} ends at {image['right']} px, past the {width} px window"
        if width < 600:
            assert image["width"] >= width - 50, f"{image['alt']} is {image['width']} px wide in a {width} px window"


def test_reports_fit_a_phone_and_a_desktop_window_and_chart_hours_by_hour(spark, tmp_path) -> None:
    """A 4 h generated log's report, and a stats.log report's page, at 390 and 1400 px."""
    binary = chromium()
    if binary is None:
        skip_or_fail("the report layout test needs Chromium (Debian: apt-get install chromium)")
    from spark_jobs import hold_report

    logs, out = tmp_path / "logs", tmp_path / "report"
    sample_log(logs, hours=4, rate_scale=0.004, queues=1)
    hold_report.run(spark, [str(logs)], str(out), min_pulls=1)
    page = (out / "report.html").read_text()
    assert "Traffic and pull time by hour" in page and '<meta name=viewport content="width=device-width' in page
    panels = re.search(r"<div class=panels>(.*?)</div>", page).group(1)
    assert panels.count("<img ") == 7  # one per group/topic of the default profile

    stats_out = tmp_path / "stats-report"
    stats_out.mkdir()
    (stats_out / "report.html").write_text(stats_page())

    browser = Browser(binary)
    try:
        for page_dir in (out, stats_out):
            for width in (390, 1400):
                _check_layout(browser.load((page_dir / "report.html").as_uri(), width, 900), width)
    finally:
        browser.close()


def _shrink(png: Path) -> None:
    """Rewrite ``png`` as small as lossless PNG goes (a palette would merge the wake colours)."""
    from PIL import Image

    with Image.open(png) as image:
        image.load()
    image.convert("RGB").save(png, optimize=True)


def main(argv: list[str]) -> int:
    """Write docs/report-1400.png and docs/report-390.png from a 38 h sample (see the module doc)."""
    from spark_jobs import hold_report
    from spark_jobs.session import build_session

    docs = Path(argv[0] if argv else "docs")
    binary = chromium()
    if binary is None:
        print("needs chromium on PATH", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="report-sample-") as scratch:
        logs, out = Path(scratch, "logs"), Path(scratch, "report")
        print(f"{sample_log(logs, hours=38, rate_scale=0.03)} events", file=sys.stderr)
        spark = build_session("report-sample", "local[2]", {"spark.ui.enabled": "false"})
        try:
            hold_report.run(spark, [str(logs)], str(out))
        finally:
            spark.stop()
        browser = Browser(binary)
        try:
            for width, height in ((1400, 2200), (390, 2600)):
                measured = browser.load((out / "report.html").as_uri(), width, 900)
                _check_layout(measured, width)
                shot = docs / f"report-{width}.png"
                browser.screenshot(shot, width, min(height, measured["height"]))
                _shrink(shot)
        finally:
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
