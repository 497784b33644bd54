"""Every Maven build the Java-driving tests use, run one after another in a background thread from
the start of the session, so they overlap the unit tests instead of each delaying the first test
that needs it (on a fresh clone they are about 100 s, downloads aside).

A build takes its project's file lock (``maven.build_classpath``), so a test that needs one still
being built waits for it rather than building it twice. A build that fails here is left to its
test, which builds again and reports the failure itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from . import apache_broker, apache_proxy, grpc_runner, oracle, scenario_runner
from .admin_shell import CONSOLE_TOOLS_VERSION, TOOLS_LINES

__all__ = ["builds", "start"]


def builds() -> list[tuple[str, Callable[[], object]]]:
    """(name, build) of each build, roughly in the order the session first needs them."""
    found: list[tuple[str, Callable[[], object]]] = []
    for line, version in oracle.ORACLE_LINES.items():
        found.append((f"oracle {version}", lambda line=line: oracle.build_classpath(line)))
    found.append(("reference brokers", lambda: apache_broker.reference_classpaths(broker_5=True)))
    for version in dict.fromkeys([*oracle.ORACLE_LINES.values(), *TOOLS_LINES.values(), CONSOLE_TOOLS_VERSION]):
        found.append((f"scenarios {version}", lambda version=version: scenario_runner.program_classpath(version)))
    found.append(("gRPC client", grpc_runner.program_classpath))
    found.append(("reference proxy", apache_proxy.reference_proxy_classpath))
    return found


def start() -> threading.Thread:
    """Run ``builds()`` in a daemon thread (it stops with the session if still going)."""

    def run() -> None:
        for _name, build in builds():
            try:
                build()
            except Exception:  # noqa: BLE001 - the test that needs it builds again and reports
                pass

    thread = threading.Thread(target=run, name="maven-prebuild", daemon=True)
    thread.start()
    return thread
