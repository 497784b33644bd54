"""SQL92 subscriptions (``MessageSelector.bySql``) with real Java push consumers of both client
lines, against rmqproxy and against the reference Apache RocketMQ 4.9.7 broker with
``enablePropertyFilter=true``: each consumer gets exactly the messages its selector matches, once,
through long-polling wakes (the consumers start before anything is sent), and a selector that does
not compile makes the consumer's ``start()`` fail with code 23.

Where the reference differs: nowhere these tests look. (Its parser ignores tokens after a complete
selector, so ``a LIKE 'x'`` compiles there and matches nothing; rmqproxy refuses it.)
"""

from __future__ import annotations

from .scenario_checks import explain, no_error, servers_fixture
from .scenario_runner import ScenarioProgram, unique_name
from .server import ScenarioServer

COUNT = 60
#: selector -> which message numbers i it selects (message i: n=i, color red/green/blue by i % 3,
#: size=big for even i, tag TagA for even i, else TagB)
SELECTORS = {
    "n >= 10 AND n < 20": lambda i: 10 <= i < 20,
    "color = 'red' OR size IS NULL": lambda i: i % 3 == 0 or i % 2 == 1,
    "color IN ('green', 'blue') AND TAGS = 'TagA'": lambda i: i % 3 != 0 and i % 2 == 0,
    "n BETWEEN 50 AND 55 AND size IS NOT NULL": lambda i: 50 <= i <= 55 and i % 2 == 0,
    "NOT (color = 'red')": lambda i: i % 3 != 0,
}


server = servers_fixture("rmqproxy", "apache", broker_conf={"enablePropertyFilter": "true"})  # off by default there


def test_sql92_consumers_get_exactly_their_matches_and_a_bad_selector_fails_at_start(
    program: ScenarioProgram, server: ScenarioServer
) -> None:
    # A 5.x consumer can race its own start heartbeat; the reference then answers its pulls 25 until
    # the next heartbeat, 30 s later (rmqproxy too, for SQL92: it cannot filter by a selector it has
    # not been told). Against the reference the consumers wait out that gap.
    # Each consumer stops once it has its count and 2 s pass with nothing more (a message it should
    # not get, or a duplicate, comes with the rest), else after the quiet time.
    quiet_ms = 35000 if server.name.startswith("apache") else 8000
    want = {expr: ([i for i in range(COUNT) if selects(i)], []) for expr, selects in SELECTORS.items()}
    result = program.run("sql", namesrv=server.namesrv, topic=unique_name("Sql", program.line),
                         group=unique_name("SqlCg", program.line), count=COUNT, expressions=";;".join(SELECTORS),
                         expect=";;".join(str(len(want[expr][0])) for expr in SELECTORS),
                         invalid="n >", wait_ms=quiet_ms, timeout=240)  # fmt: skip
    no_error(result, server)
    got = {c["expression"]: (c["received"], c["duplicates"]) for c in result["consumers"]}
    assert got == want, explain(result, server, "consumers")
    assert "23" in result["invalid_start"], explain(result, server, "invalid_start")
