"""Request-reply with the real Java clients of both lines (``DefaultMQProducer.request`` and
``MessageUtil.createReplyMessage``), against rmqproxy and against the reference Apache RocketMQ
4.9.7 broker: every request gets its reply, on ``<cluster>_REPLY_TOPIC``.

Where the reference differs: when the client skips the heartbeat carrying its new subVersion
(``scenario_checks.heartbeat_race``), the reference refuses the responder's pulls until the next
heartbeat, up to 30 s, so the first request goes unanswered that long; rmqproxy serves them. The
scenario's warm-up request allows for it; the five requests after it each get their reply.
"""

from __future__ import annotations

from .scenario_checks import explain, heartbeat_race, no_error, servers_fixture
from .scenario_runner import ScenarioProgram, unique_name
from .server import ScenarioServer


server = servers_fixture("rmqproxy", "apache")


def test_every_request_gets_its_reply(program: ScenarioProgram, server: ScenarioServer) -> None:
    result = program.run("reply", namesrv=server.namesrv, topic=unique_name("Req", program.line),
                         group=unique_name("ReqCg", program.line), count=5)  # fmt: skip
    no_error(result, server)
    assert result["warmup_failure"] is None, explain(result, server, "warmup_failure", "warmup_ms")
    if server.name == "rmqproxy":  # a skipped heartbeat does not stall it
        assert result["warmup_ms"] <= 5000, explain(result, server, "warmup_ms")
    elif heartbeat_race(result["_log_dir"]):
        print(f"reply: the client skipped a heartbeat; the reference answered the warm-up in {result['warmup_ms']} ms")
    assert result["failures"] == [], explain(result, server, "failures", "replies")
    assert result["replies"] == [f"re:q{i}" for i in range(5)], explain(result, server, "replies")
    assert set(result["reply_topics"]) == {"DefaultCluster_REPLY_TOPIC"}, explain(result, server, "reply_topics")
