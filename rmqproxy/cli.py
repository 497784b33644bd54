"""Command line: ``rmqproxy`` (click). Subcommands arrive with their issues (serve, report)."""

from __future__ import annotations

import click

from . import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="rmqproxy")
def main() -> None:
    """rmqproxy: RocketMQ name server and broker that measures pull hold and service time."""


if __name__ == "__main__":
    main()
