"""A real Prometheus (and promtool) for tests: its own process, config, storage and port.

::

    with RunningPrometheus(tmp_path, targets=["127.0.0.1:5557"], rule_files=[ALERTS]) as prom:
        prom.wait_for_targets_up()
        prom.query('sum(rmqproxy_held_pulls)')  # → the API's result list

The Debian package also installs a systemd service; tests never use it. Each ``RunningPrometheus``
runs ``prometheus --config.file=<tmp> --storage.tsdb.path=<tmp> --web.listen-address=127.0.0.1:<free>``
with 1 s scrape and rule evaluation intervals, and its log goes to ``<workdir>/prometheus.log``.
``require(tool)`` skips a test when the binary is missing, and fails it when ``CI=true``.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Self

import yaml

from tests.needs import skip_or_fail

from ..interop.server import free_port


class PrometheusError(RuntimeError):
    """Prometheus did not start, or answered a query with an error."""


def require(tool: str) -> str:
    """Path of ``tool`` (prometheus, promtool); skip without it, or fail under CI."""
    path = shutil.which(tool)
    if path is None:
        skip_or_fail(f"{tool} not on PATH (Debian: apt-get install prometheus)")
    return path


def finite(result: list[dict]) -> list[float]:
    """The finite values of an instant-query result (NaN comes from quantiles over no increase)."""
    values = [float(item["value"][1]) for item in result]
    return [v for v in values if math.isfinite(v)]


class RunningPrometheus:
    START_TIMEOUT = 30.0

    def __init__(
        self, workdir: Path, *, targets: list[str] = (), rule_files: list[Path] = (), interval: str = "1s"
    ) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config_path = workdir / "prometheus.yml"
        config = {
            "global": {"scrape_interval": interval, "scrape_timeout": interval, "evaluation_interval": interval},
            "rule_files": [str(p) for p in rule_files],
            "scrape_configs": [{"job_name": "rmqproxy", "static_configs": [{"targets": list(targets)}]}],
        }
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        self.log_path = workdir / "prometheus.log"
        cmd = [
            require("prometheus"),
            f"--config.file={self.config_path}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--log.level=warn",
        ]
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        try:
            self._wait_ready()
        except BaseException:
            self.close()
            raise

    def _get(self, path: str, **params: str) -> dict:
        url = f"{self.url}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as e:  # 400/422 carry the API's error JSON
            body = json.loads(e.read() or b"{}")
            raise PrometheusError(f"{path} {params}: {body.get('errorType')}: {body.get('error')}") from None

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.START_TIMEOUT
        while True:
            if self._proc.poll() is not None:
                raise PrometheusError(f"prometheus exited with {self._proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError):
                pass
            if time.monotonic() > deadline:
                raise PrometheusError(f"prometheus not ready within {self.START_TIMEOUT:.0f}s:\n{self.log_tail()}")
            time.sleep(0.1)

    def query(self, expr: str) -> list[dict]:
        """Instant query at the current time: the ``result`` list (vector or scalar as one item)."""
        data = self._get("/api/v1/query", query=expr)["data"]
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": data["result"]}]
        return data["result"]

    def rule_groups(self) -> list[dict]:
        return self._get("/api/v1/rules")["data"]["groups"]

    def alerts(self) -> list[dict]:
        return self._get("/api/v1/alerts")["data"]["alerts"]

    def wait_for_targets_up(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            targets = self._get("/api/v1/targets")["data"]["activeTargets"]
            if targets and all(t["health"] == "up" for t in targets):
                return
            if time.monotonic() > deadline:
                raise PrometheusError(f"scrape targets not up: {[(t['scrapeUrl'], t['lastError']) for t in targets]}")
            time.sleep(0.2)

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
