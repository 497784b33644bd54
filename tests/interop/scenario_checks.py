"""What the real-client scenario tests share: starting a server under test, sending to a fresh
topic, the checks on a scenario's RESULT, and the known gaps of the reference broker.

Known facts of the reference (``reference_gap``): a 5.x DefaultLitePullConsumer sends
LITE_PULL_MESSAGE (361), which 4.9.x brokers answer "request type 361 not supported"; 5.x mqadmin
topicStatus and consumerProgress first call GET_TOPIC_CONFIG (351), likewise unsupported.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .scenario_runner import ScenarioProgram, client_log_tail, unique_name
from .server import ScenarioServer, serve_available, start_target

__all__ = ["assert_all_received", "explain", "heartbeat_race", "no_error", "reference_gap", "send_to_new_topic",
           "start_server", "servers_fixture", "traffic_across"]


@functools.lru_cache(maxsize=1)
def _serve_available() -> bool:
    return serve_available()


def start_server(target: str, **options: Any) -> ScenarioServer:
    """The server under test: ``"rmqproxy"``, ``"apache"`` (the reference broker) or ``"apache5"``
    (its 5.x broker)."""
    if target == "rmqproxy" and not _serve_available():
        pytest.fail("rmqproxy has no working `serve` command", pytrace=False)
    return start_target(target, **options)


def servers_fixture(*targets: str, **options: Any) -> Any:
    """A module-scoped ``server`` fixture that runs the module's tests against each of ``targets``
    in turn (``start_server``'s kinds), each started with ``options`` (e.g. ``broker_conf``): the
    same assertions checked against rmqproxy and the reference."""

    @pytest.fixture(scope="module", params=list(targets))
    def server(request: pytest.FixtureRequest) -> Iterator[ScenarioServer]:
        srv = start_server(request.param, **options)
        try:
            yield srv
        finally:
            srv.close()

    return server


def reference_gap(server: ScenarioServer, line: str, what: str) -> str | None:
    """Why ``server``, when it is the reference broker, cannot pass ``what`` on ``line`` (None when it can)."""
    if server.name.startswith("apache") and what == "transaction-kill-9":
        return ("after a kill -9 the 4.9.7 broker checks back both copies of a half message it had already checked "
                "(answered UNKNOW) before the kill, and the producer's second COMMIT stores the message again: each "
                "such one committed on check-back arrives twice, those committed before the kill once (our reading "
                "of its code: decisions are matched by half-queue offset, and a check left UNKNOW puts a new copy, "
                "so the older copy looks undecided once its check progress is lost)")
    if server.name.startswith("apache") and line == "5":
        if what == "litepull":
            return "5.x lite pull sends LITE_PULL_MESSAGE (361): the 4.9.x reference answers 'request type 361 not supported'"
        if what in ("topicStatus", "consumerProgress"):
            return "5.x mqadmin calls GET_TOPIC_CONFIG (351) first: 'request type 351 not supported' on 4.9.x"
    return None


#: What a client logs when a rebalance's heartbeat (the one carrying a new subVersion) found the
#: heartbeat lock taken by the scheduled heartbeat and was skipped: the broker then knows an older
#: subVersion until the next scheduled heartbeat, 30 s later (4.9.x ``sendHeartbeatToAllBrokerWithLock``,
#: 5.x ``...WithLockV2``; both only ``tryLock``). More likely on a loaded machine.
HEARTBEAT_SKIPPED = re.compile(r"lock heartBeat, but failed")


def heartbeat_race(log_dir: Path | str) -> bool:
    """Whether the client of one scenario run (its ``_log_dir``) skipped a heartbeat that carried a new subVersion, so
    its pulls met a broker whose registered subscription is older (the reference answers 25 until
    the next heartbeat; rmqproxy serves them unfiltered, ``processors/pull.py``)."""
    for path in sorted(Path(log_dir).rglob("rocketmq_client*.log")):
        if HEARTBEAT_SKIPPED.search(path.read_text(errors="replace")):
            return True
    return False


def explain(result: dict[str, Any], server: ScenarioServer, *fields: str) -> str:
    """A failure message: the result's fields (or all but bulky ones), client warnings, server log tail."""
    shown = {k: v for k, v in result.items() if (k in fields if fields else not k.startswith("_"))}
    text = "\n".join(f"  {k}: {v}" for k, v in shown.items())
    return (
        f"client {result.get('client_version')} scenario {result.get('scenario')}:\n{text}\n"
        f"--- client progress ---\n" + "\n".join(result.get("_progress", [])[-15:]) +
        f"\n--- client warnings ---\n{client_log_tail(result['_log_dir'], 2500)}\n"
        f"--- server ({server.name}) log tail ---\n{server.log_tail(2500)}"
    )


def no_error(result: dict[str, Any], server: ScenarioServer) -> None:
    assert "error" not in result, explain(result, server, "error", "error_trace")


def assert_all_received(r: dict[str, Any], server: ScenarioServer, what: str) -> None:
    """Every expected key arrived, and nothing unexpected did."""
    fields = ("complete", "expected", "received", "distinct", "duplicates", "missing", "missing_keys",
              "missing_by_mode", "unexpected", "unexpected_keys", "tags", "queues", "first_message_ms", "elapsed_ms")
    assert r["missing"] == 0, f"{what}: {r['missing']} of {r['expected']} keys never arrived\n" + explain(r, server, *fields)
    assert r["distinct"] == r["expected"] and r["unexpected"] == 0, explain(r, server, *fields)


def send_to_new_topic(program: ScenarioProgram, server: ScenarioServer, tmp_path_factory: pytest.TempPathFactory,
                      kind: str, **opts: Any) -> dict[str, Any]:
    """The send scenario into a fresh topic named after ``kind``; the result carries the manifest's path."""
    topic = unique_name(kind, program.line)
    manifest = tmp_path_factory.mktemp("manifest") / f"{topic}.tsv"
    result = program.run("send", namesrv=server.namesrv, topic=topic, group=f"{topic}-producer", manifest=manifest,
                         **opts)
    result["_manifest"] = str(manifest)
    return result


def traffic_across(program: ScenarioProgram, namesrv: str, topic: str, *events: Callable[[], None],
                   after: int = 200, timeout: float = 90,
                   heartbeat_ms: int | None = None,
                   poll_namesrv_ms: int | None = None,
                   rebalance_interval_ms: int | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:  # fmt: skip
    """The restart scenario (a producer and a consumer running on ``topic``) across ``events``:
    each runs once ``after`` messages have arrived (the first) or ``after`` more than were sent when
    the one before ran. Returns the progress at each of those points and the scenario's result
    (``_timeline``: when each progress line came, ``RunningScenario.timeline``).
    ``heartbeat_ms``, ``poll_namesrv_ms`` and ``rebalance_interval_ms`` set the clients' heartbeat,
    route poll and rebalance intervals (else the client's 30 s, 30 s and 20 s)."""
    run = program.start("restart", namesrv=namesrv, topic=topic, group=f"{topic}-cg", interval_ms=5,
                        heartbeat_ms=heartbeat_ms, poll_namesrv_ms=poll_namesrv_ms,
                        rebalance_interval_ms=rebalance_interval_ms)  # fmt: skip
    try:
        marks = [run.wait_progress("received", after, timeout=timeout)]
        for event in events:
            event()
            sent = run.drain().get("sent", 0)
            marks.append(run.wait_progress("received", sent + after, timeout=timeout))
        result = run.finish(timeout=120)
        result["_timeline"] = run.timeline
        return marks, result
    finally:
        run.kill()
