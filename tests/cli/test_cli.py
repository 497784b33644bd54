"""The ``rmqproxy`` console script."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from codec.implementation import describe
from rmqproxy import __version__
from rmqproxy.cli import main

REPO = Path(__file__).resolve().parents[2]


def test_version_and_help() -> None:
    runner = CliRunner()
    version = runner.invoke(main, ["--version"])
    assert version.exit_code == 0 and __version__ in version.output and f"(codec: {describe()})" in version.output
    helped = runner.invoke(main, ["--help"])
    assert helped.exit_code == 0 and "RocketMQ" in helped.output


def test_installed_console_script_runs() -> None:
    script_path = Path(sys.executable).parent / "rmqproxy"
    assert script_path.exists(), "setup.cfg declares the rmqproxy console script"
    script = subprocess.run([str(script_path), "--version"], capture_output=True, text=True)
    assert script.returncode == 0 and script.stdout.strip() == f"rmqproxy, version {__version__} (codec: {describe()})"


def test_version_says_the_environment_forced_the_pure_codec() -> None:
    """RMQPROXY_PURE_PYTHON=1 makes a process run the pure-Python codec, and say so."""
    script = subprocess.run([sys.executable, "-c", "from rmqproxy.cli import main; main()", "--version"], cwd=REPO,
                            env={"PATH": "/usr/bin:/bin", "RMQPROXY_PURE_PYTHON": "1"}, capture_output=True, text=True)  # fmt: skip
    assert script.returncode == 0 and script.stdout.strip().endswith("(codec: pure: RMQPROXY_PURE_PYTHON=1)")
