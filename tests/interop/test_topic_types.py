"""5.x topic message types with the real mqadmin of rocketmq-tools 5.3.1, against rmqproxy and the
reference Apache RocketMQ 5.3.1 broker (4.9.x has no topic attributes): ``updateTopic -a
+message.type=FIFO`` is kept and shown by ``exportMetadata``, ``-message.type`` removes it, and
MIXED and unknown keys are refused with the same words.

Where the reference differs: the 5.3.1 broker takes ``+message.type=MIXED`` (its check reads the
type before the ``+`` is stripped, so it never fires); 5.3.3 refuses it with INVALID_PARAMETER
(29) "MIXED message type is not supported.", as rmqproxy does, and this test expects each its
own way. Its other attribute keys take values rmqproxy refuses (compaction, batch consume
queues, per-topic retention: tests/server), which this module does not try.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from .admin_shell import TOOLS_LINES, AdminShell
from .scenario_checks import servers_fixture
from .scenario_runner import ScenarioProgram, unique_name
from .server import ScenarioServer

server = servers_fixture("rmqproxy", "apache5")


@pytest.fixture(scope="module")
def shell(server: ScenarioServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminShell]:
    """A 5.3.1 mqadmin shell on ``server``."""
    program = ScenarioProgram(TOOLS_LINES["5"], log_root=tmp_path_factory.mktemp("topic-types"))
    admin = AdminShell(program, server.namesrv, producer_group=unique_name("TypesP", "5"))
    try:
        yield admin
    finally:
        admin.close()


def _text(reply: dict) -> str:
    return f"{reply.get('stdout', '')}{reply.get('stderr', '')}{reply.get('thrown') or ''}"


def _update(shell: AdminShell, topic: str, *attributes: str) -> dict:
    args = ["updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "4", "-w", "4"]
    return shell.mqadmin(*args, *[x for a in attributes for x in ("-a", a)])


def _attributes(shell: AdminShell, server: ScenarioServer, topic: str, out: Path) -> dict:
    """The topic's attributes in an ``exportMetadata`` of the cluster (GET_ALL_TOPIC_CONFIG)."""
    reply = shell.mqadmin("exportMetadata", "-c", "DefaultCluster", "-f", str(out))
    table = json.loads((out / "metadata.json").read_text())["topicConfigTable"]
    assert topic in table, f"{server.name}: {topic} not exported\n{_text(reply)}"
    return table[topic].get("attributes") or {}


def test_a_topic_keeps_the_message_type_mqadmin_gives_it(shell: AdminShell, server: ScenarioServer,
                                                         tmp_path: Path) -> None:  # fmt: skip
    topic = unique_name("Fifo", "5")
    made = _update(shell, topic, "+message.type=FIFO")
    assert "success" in made["stdout"], f"{server.name}: {_text(made)}"
    assert _attributes(shell, server, topic, tmp_path / "one") == {"message.type": "FIFO"}, server.name
    again = _update(shell, topic)  # an update without -a keeps the type
    assert "success" in again["stdout"], f"{server.name}: {_text(again)}"
    assert _attributes(shell, server, topic, tmp_path / "two") == {"message.type": "FIFO"}, server.name
    removed = _update(shell, topic, "-message.type")
    assert "success" in removed["stdout"], f"{server.name}: {_text(removed)}"
    assert _attributes(shell, server, topic, tmp_path / "three") == {}, server.name


@pytest.mark.parametrize(("attribute", "words"), [
    ("+message.type=MIXED", "MIXED message type is not supported."),
    ("+unknown.key=1", "unsupported key: unknown.key"),
])  # fmt: skip
def test_mixed_types_and_unknown_keys_are_refused(shell: AdminShell, server: ScenarioServer, attribute: str,
                                                  words: str) -> None:  # fmt: skip
    topic = unique_name("Refused", "5")
    reply = _update(shell, topic, attribute)
    if server.name == "apache-5.3.1" and "MIXED" in attribute:  # its check never fires (module doc)
        assert "success" in reply["stdout"], f"{server.name} refused MIXED now: {_text(reply)}"
        return
    assert "success" not in reply["stdout"] and words in _text(reply), f"{server.name}: {_text(reply)}"
    route = shell.mqadmin("topicRoute", "-t", topic)
    assert "No topic route info" in _text(route) or "TOPIC_NOT_EXIST" in _text(route), f"{server.name}: created"
