"""5.x topic attributes (``mqadmin updateTopic -a``): a topic's message type is taken, kept across
restarts and shown by the admin reads; the other keys are taken at the value rmqproxy always
has, and anything else (compaction, batch consume queues, per-topic retention, MIXED, unknown
keys, malformed items) is refused with a 5.x broker's code, never stored and ignored."""

from __future__ import annotations

import json

import pytest

from codec.codes import RequestCode as C
from codec.codes import ResponseCode as R

from .harness import Client

OK, SYS, PARAM = R.SUCCESS, R.SYSTEM_ERROR, R.INVALID_PARAMETER


def _update(server, attributes: str | None, topic: str = "Attr"):
    return Client(server).call(
        C.UPDATE_AND_CREATE_TOPIC, topic=topic, default_topic="TBW102", read_queue_nums=4, write_queue_nums=4,
        perm=6, topic_filter_type="SINGLE_TAG", topic_sys_flag=0, order=False, attributes=attributes,
    )  # fmt: skip


def _shown(server, topic: str = "Attr") -> tuple[dict, dict | None]:
    """The topic's attributes as GET_TOPIC_CONFIG (351) and GET_ALL_TOPIC_CONFIG (21) show them."""
    one = Client(server).call(C.GET_TOPIC_CONFIG, topic=topic)
    assert one.code == OK, one.remark
    every = json.loads(Client(server).call(C.GET_ALL_TOPIC_CONFIG).body)["topicConfigTable"]
    return json.loads(one.body)["attributes"], every[topic].get("attributes")


@pytest.mark.parametrize(("attributes", "code", "remark", "kept"), [
    (None, OK, "", {}),
    ("", OK, "", {}),
    ("+message.type=FIFO", OK, "", {"message.type": "FIFO"}),
    ("+message.type=TRANSACTION,+cleanup.policy=DELETE", OK, "",
     {"message.type": "TRANSACTION", "cleanup.policy": "DELETE"}),
    ("+message.type=MIXED", PARAM, "MIXED message type is not supported.", None),
    ("+message.type=BATCH", SYS, "is not supported by rmqproxy", None),
    ("-message.type", SYS, "only add attribute is supported while creating topic. key: message.type", None),
    ("+cleanup.policy=COMPACTION", SYS, "is not supported by rmqproxy", None),
    ("+queue.type=BatchCQ", SYS, "is not supported by rmqproxy", None),
    ("+reserve.time=3600", SYS, "is not supported by rmqproxy", None),
    ("+unknown.key=1", SYS, "unsupported key: unknown.key", None),
    ("cleanup.policy=DELETE", SYS, "is not +key=value or -key", None),
    ("+message.type", SYS, "is not +key=value or -key", None),
    ("+message.type=FIFO,+message.type=DELAY", SYS, "alter duplication key", None),
    ("+message.type=FIFO,+cleanup.policy=COMPACTION", SYS, "is not supported by rmqproxy", None),
])  # fmt: skip
def test_a_new_topic_takes_only_the_attributes_it_keeps(servers, tmp_path, attributes, code, remark, kept) -> None:
    server, _ = servers(tmp_path)
    answer = _update(server, attributes)
    assert (answer.code, remark in (answer.remark or "")) == (code, True), answer.remark
    if kept is None:
        assert server.topics.get("Attr") is None
        return
    assert _shown(server) == (kept, kept or None)
    assert server.topics.get("Attr").message_type == kept.get("message.type", "NORMAL")


def test_a_topic_s_message_type_changes_and_survives_a_restart(servers, tmp_path) -> None:
    server, _ = servers(tmp_path)
    assert _update(server, "+message.type=FIFO").code == OK
    assert _update(server, None).code == OK  # an update without attributes keeps them
    assert _shown(server) == ({"message.type": "FIFO"},) * 2
    assert _update(server, "-message.type").code == OK
    assert _shown(server) == ({}, None) and server.topics.get("Attr").message_type == "NORMAL"
    again = _update(server, "-message.type")
    assert (again.code, again.remark) == (SYS, "attempt to delete a nonexistent key: message.type")
    assert _update(server, "+message.type=DELAY").code == OK
    server.stop()
    server, _ = servers(tmp_path)
    assert _shown(server) == ({"message.type": "DELAY"},) * 2
    assert server.topics.get("Attr").message_type == "DELAY"


def test_a_topics_file_with_an_attribute_rmqproxy_does_not_keep_stops_the_start(servers, tmp_path) -> None:
    """A topics.json written by hand (or carried over) asking for compaction would be served
    without it: the start stops naming the topic instead."""
    server, _ = servers(tmp_path)
    assert _update(server, "+message.type=FIFO").code == OK
    server.stop()
    path = next(tmp_path.rglob("topics.json"))
    data = json.loads(path.read_text())
    data["Attr"]["attributes"]["cleanup.policy"] = "COMPACTION"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="topic 'Attr' cannot be served as configured: topic attribute"):
        servers(tmp_path)
