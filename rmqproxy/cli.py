"""Command line: ``rmqproxy serve`` and ``proxy`` run the server, ``report`` the PySpark report, and
``compact`` rewrites a pull event log's closed files as Parquet."""

from __future__ import annotations

import gc
import resource
import sys
from pathlib import Path

import click

from codec import implementation as codec_implementation

from . import __version__
from .observe import rollup
from .core.clocks import monotonic_reactor
from .core.config import SETTINGS, load


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="rmqproxy",  # and which codec runs (README, Install)
                      message=f"%(prog)s, version %(version)s (codec: {codec_implementation.describe().replace('%', '%%')})")
def main() -> None:
    """rmqproxy: RocketMQ name server and broker that measures pull hold and service time."""


def _setting_options(mode: str):
    """One ``--kebab-case`` option per key of ``mode`` ("serve" or "proxy", config.SETTINGS), default: unset."""

    def decorate(fn):
        for setting in reversed(SETTINGS):
            if getattr(setting, mode):
                fn = _option(setting)(fn)
        return fn

    return decorate


def _option(setting):
    kind = click.BOOL if setting.type is bool else setting.type
    return click.option(
        setting.flag, setting.field, type=kind, default=None,
        help=f"{setting.help} [{setting.key}, default {setting.default}]",
    )  # fmt: skip


@main.command()
@click.option("-c", "--config", "conf_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="broker.conf-style properties file")  # fmt: skip
@_setting_options("serve")
def serve(conf_file: Path | None, **overrides) -> None:
    """Run the name server and broker on the embedded store until SIGINT/SIGTERM."""
    from .broker.server import Server

    _run(Server, conf_file, overrides)


@main.command()
@click.option("-c", "--config", "conf_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="proxy.conf-style properties file")  # fmt: skip
@click.option("--worker-slot", type=click.IntRange(0), default=0, hidden=True,
              help="run as this worker of a supervisor (its control channel on fd 3)")  # fmt: skip
@click.option("--worker-dir", default="", hidden=True, help="the supervisor's folder of the workers' counter files")
@_setting_options("proxy")
def proxy(conf_file: Path | None, worker_slot: int, worker_dir: str, **overrides) -> None:
    """Run in front of an Apache RocketMQ cluster (--namesrv-addr) until SIGINT/SIGTERM; with
    --workers N (default: one per core) as N worker processes sharing the ports."""
    from .proxy.server import ProxyServer
    from .proxy.workers import Supervisor, worker_count

    def make(config, reactor):
        workers = worker_count(config)
        if worker_slot:
            return ProxyServer(config, reactor, worker=worker_slot, workers=workers, worker_dir=worker_dir)
        if workers > 1:
            return Supervisor(config, reactor, _proxy_args(conf_file, overrides), workers)
        return ProxyServer(config, reactor)

    _run(make, conf_file, overrides)


def _proxy_args(conf_file: Path | None, overrides: dict) -> list[str]:
    """The proxy command's arguments as given (the file, then each flag set): a worker's start."""
    flags = {setting.field: setting.flag for setting in SETTINGS}
    args = ["-c", str(conf_file)] if conf_file is not None else []
    for field, value in overrides.items():
        if value is not None:
            args += [flags[field], str(value)]
    return args


def _run(server_class, conf_file: Path | None, overrides: dict) -> None:
    """Load the configuration, start ``server_class(config, reactor)`` (a class or a function) and run the reactor."""
    from twisted.internet import reactor
    from twisted.logger import globalLogBeginner, textFileLogObserver

    monotonic_reactor(reactor)  # before anything is scheduled: every relative wait on the monotonic clock
    try:
        config = load(conf_file, overrides)
        server = server_class(config, reactor)
    except (ValueError, KeyError) as exc:
        raise click.BadParameter(str(exc)) from None
    globalLogBeginner.beginLoggingTo([textFileLogObserver(sys.stderr)], redirectStandardIO=False)
    _raise_fd_limit()
    try:
        server.start()
    except Exception as exc:
        raise click.ClickException(f"cannot start: {exc}") from None
    reactor.addSystemEventTrigger("before", "shutdown", server.stop)
    # Everything loaded so far (modules, tables, the store) lives as long as the process: keep it
    # out of the cyclic collector's full passes, which otherwise scan it all while the reactor waits.
    gc.freeze()
    reactor.run()


def _raise_fd_limit() -> None:
    """Lift the soft fd limit to the hard one, as the JVM does for a Java broker at start: a
    server's connections and files should not stop at a shell's default of 1024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass  # e.g. an unlimited hard limit the kernel caps lower: keep the soft one


@main.command()
@click.argument("log_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--wait/--no-wait", default=True, help="wait for another compaction of LOG_DIR to end (else exit 0)")
@click.option("--cpu-share", type=click.FloatRange(0, 1, min_open=True), default=1.0, show_default=True,
              help="the share of one core to use at most (the server's own background pass uses 0.25)")
@click.option("--sketch-k", type=click.IntRange(8, 65535), default=rollup.DEFAULT.sketch_k, show_default=True,
              help="the KLL sketch size of the rollups (a report run with another reads the rows)")
@click.option("--short-polling-ms", type=click.IntRange(0), default=rollup.DEFAULT.short_polling_ms,
              show_default=True, help="the broker's shortPollingTimeMills, for the rollups' overshoot")
def compact(log_dir: Path, wait: bool, cpu_share: float, sketch_k: int, short_polling_ms: int) -> None:
    """Rewrite the closed files of a pull event log (LOG_DIR) as Parquet, partitioned by date and
    hour, each with its rollup (the cells a report reads instead of its rows)."""
    from .observe.compaction import Busy, dataset_files
    from .observe.compaction import compact as compact_dir

    try:
        written = compact_dir(log_dir, wait=wait, cpu_share=cpu_share, cells=rollup.Options(sketch_k, short_polling_ms))
    except Busy as exc:
        click.echo(str(exc), err=True)
        return
    json_files, parquet = dataset_files(log_dir)
    click.echo(f"compacted {len(written)} file(s) in {log_dir}; a report reads {len(parquet)} Parquet and "
               f"{len(json_files)} JSON-lines file(s) there", err=True)  # fmt: skip


def _register_report() -> None:
    """``rmqproxy report``: the PySpark report (click only here; pyspark loads when it runs)."""
    from spark_jobs.cli import report

    main.add_command(report)


_register_report()

if __name__ == "__main__":
    main()
