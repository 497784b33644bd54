"""5.x timer messages (``TIMER_DELAY_SEC``, ``TIMER_DELAY_MS``, ``TIMER_DELIVER_MS``) with the real
Java clients of both lines, against rmqproxy and against the reference Apache RocketMQ 5.3.1
broker (4.9.x has no timers; ``timerWheelEnable`` is on by default there): messages at 1 s, 3 s
and 10 s arrive at their time, once, and a restart in between loses none.

Where the reference differs: its timer wheel works in ``timerPrecisionMs`` slots (1 s) and rounds
the delivery time down, so its messages arrive up to a second early; rmqproxy delivers at the
millisecond asked. The figures of each run are printed (``-s``) for the record.
"""

from __future__ import annotations

import statistics

from .scenario_checks import explain, no_error, servers_fixture
from .scenario_runner import ScenarioProgram, unique_name
from .server import ScenarioServer
from .wire import WireClient

DELAYS_MS = "1000,3000,10000"


server = servers_fixture("rmqproxy", "apache5")


def bounds_ms(server: ScenarioServer, late_ms: int) -> tuple[int, int]:
    """How early and how late a message may arrive: the reference works in 1 s slots (early by up
    to one when it rounds down, late by up to one plus its tick); rmqproxy is never early (a few
    ms for the two clocks' reading)."""
    return (1000, late_ms + 1500) if server.name.startswith("apache") else (5, late_ms)


def new_topic(server: ScenarioServer, kind: str, line: str) -> str:
    """A topic created on the broker first: a 5.x broker registers one created by a first send
    with the name server some time later, and the client gives up on its route meanwhile."""
    topic = unique_name(kind, line)
    with WireClient(server.broker_addr) as wire:
        assert wire.create_topic(topic, 4).code == 0
    return topic


def check(result: dict, server: ScenarioServer, late_bound_ms: int) -> list[int]:
    no_error(result, server)
    assert result["sent"] == 9 and (result["missing"], result["duplicates"]) == ([], []), explain(result, server)
    late = sorted(r["late_ms"] for r in result["records"])
    early_ms, late_ms = bounds_ms(server, late_bound_ms)
    assert -early_ms <= late[0] and late[-1] <= late_ms, explain(result, server, "records")
    print(f"{server.name} timer lateness ms: p50 {statistics.median(late)} max {late[-1]} min {late[0]}")
    return late


def test_timer_messages_arrive_at_their_time(program: ScenarioProgram, server: ScenarioServer) -> None:
    result = program.run("timer", namesrv=server.namesrv, topic=new_topic(server, "Timer", program.line),
                         group=unique_name("TimerCg", program.line), delays_ms=DELAYS_MS, per=3)  # fmt: skip
    check(result, server, late_bound_ms=1000)


def test_timer_messages_survive_a_restart(program: ScenarioProgram, server: ScenarioServer) -> None:
    """Sent, then the broker restarts at once: every message still arrives, once, and none early
    (those due while it was down arrive when it is back)."""
    run = program.start("timer", namesrv=server.namesrv, topic=new_topic(server, "TimerRestart", program.line),
                        group=unique_name("TimerRestartCg", program.line), delays_ms=DELAYS_MS, per=3, pause="true")  # fmt: skip
    try:
        run.wait_progress("sent", 9, timeout=90)
        server.restart()
    except BaseException:
        run.kill()
        raise
    check(run.finish(timeout=150), server, late_bound_ms=40_000)
