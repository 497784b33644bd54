"""The ``rmqproxy`` console script."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from rmqproxy import __version__
from rmqproxy.cli import main


def test_version_and_help() -> None:
    runner = CliRunner()
    version = runner.invoke(main, ["--version"])
    assert version.exit_code == 0 and __version__ in version.output
    helped = runner.invoke(main, ["--help"])
    assert helped.exit_code == 0 and "RocketMQ" in helped.output


def test_installed_console_script_runs() -> None:
    script_path = Path(sys.executable).parent / "rmqproxy"
    assert script_path.exists(), "setup.cfg declares the rmqproxy console script"
    script = subprocess.run([str(script_path), "--version"], capture_output=True, text=True)
    assert script.returncode == 0 and script.stdout.strip() == f"rmqproxy, version {__version__}"
