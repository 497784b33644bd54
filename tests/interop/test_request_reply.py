"""Request-reply with the real Java clients of both lines (``DefaultMQProducer.request`` and
``MessageUtil.createReplyMessage``), against rmqproxy and against the reference Apache RocketMQ
4.9.7 broker: every request gets its reply, on ``<cluster>_REPLY_TOPIC``.

Where the reference differs: nowhere this test looks.
"""

from __future__ import annotations

from .scenario_checks import explain, no_error, servers_fixture
from .scenario_runner import ScenarioProgram, unique_name
from .server import ScenarioServer


server = servers_fixture("rmqproxy", "apache")


def test_every_request_gets_its_reply(program: ScenarioProgram, server: ScenarioServer) -> None:
    result = program.run("reply", namesrv=server.namesrv, topic=unique_name("Req", program.line),
                         group=unique_name("ReqCg", program.line), count=5)  # fmt: skip
    no_error(result, server)
    assert result["failures"] == [], explain(result, server, "failures", "replies")
    assert result["replies"] == [f"re:q{i}" for i in range(5)], explain(result, server, "replies")
    assert set(result["reply_topics"]) == {"DefaultCluster_REPLY_TOPIC"}, explain(result, server, "reply_topics")
