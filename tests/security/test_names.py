"""No name a client sends can put a file outside the store (issue 24, names): every path that can
create a topic or a group refuses a bad name with the reference's code and remark, and the store
refuses a consume-queue folder outside itself whatever reaches it.

The server runs on the fake reactor with its real store in ``tmp_path/store``; each traversal is
aimed at ``tmp_path`` (three levels up from a consume-queue folder), so "nothing outside the
store" is checked as "``tmp_path`` holds only ``store``", and nothing may name the bad topic.
"""

from __future__ import annotations

import json

import pytest

from codec.bodies import (
    ConsumerData,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    ProducerData,
    build_subscription,
)
from codec.codes import RequestCode as C
from codec.codes import ResponseCode as R
from codec.message import Message
from rmqproxy.broker.store import PutStatus

from ..server.harness import Client

UP = "../../../../x"  # from <store>/consumequeue/<topic>/ up to the folder holding the store


@pytest.fixture
def broker(servers, tmp_path):
    """(server, reactor, store path): the default server, and where its store lies."""
    return (*servers(), tmp_path)


def assert_nothing_outside_the_store(tmp_path, *bad_names: str) -> None:
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]
    topics_json = tmp_path / "store" / "config" / "topics.json"
    stored = json.loads(topics_json.read_text()) if topics_json.exists() else {}
    for name in bad_names:
        assert name not in stored
    for path in (tmp_path / "store").rglob("*"):
        assert ".." not in path.name, path


def test_a_route_request_for_a_bad_retry_topic_creates_nothing(broker) -> None:
    server, _reactor, tmp_path = broker
    client = Client(server)
    for topic in (f"%RETRY%{UP}", "%RETRY%" + "g" * 10_000, "%RETRY%"):
        answer = client.call(C.GET_ROUTEINFO_BY_TOPIC, topic=topic)
        assert answer.code == R.TOPIC_NOT_EXIST and answer.remark.startswith("No topic route info")
        assert server.topics.get(topic) is None
    assert client.call(C.GET_ROUTEINFO_BY_TOPIC, topic="%RETRY%good_group-1").code == R.SUCCESS
    assert_nothing_outside_the_store(tmp_path, f"%RETRY%{UP}", "%RETRY%" + "g" * 10_000)


def test_a_heartbeat_with_a_bad_group_registers_nothing_for_it(broker) -> None:
    server, _reactor, tmp_path = broker
    client = Client(server)
    consumers = [
        ConsumerData(UP, "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET", [], False),
        ConsumerData("g" * 256, "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET", [], False),
        ConsumerData("good", "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET",
                     [build_subscription("T", "*", 1), build_subscription(UP, "*", 1)], False),
    ]  # fmt: skip
    data = HeartbeatData("c@1", [ProducerData(UP), ProducerData("pg")], consumers)
    assert client.call(C.HEART_BEAT, body=data.to_json()).code == R.SUCCESS  # a 5.x broker skips bad groups
    assert set(server.clients.consumers) == {"good"}
    assert set(server.clients.consumers["good"].subscriptions) == {"T"}
    assert set(server.clients.producers) == {"pg"}
    assert server.topics.get("%RETRY%good") is not None and server.topics.get(f"%RETRY%{UP}") is None
    assert_nothing_outside_the_store(tmp_path, f"%RETRY%{UP}")


def test_send_back_for_a_bad_group_is_subscription_group_not_exist(broker) -> None:
    server, _reactor, tmp_path = broker
    client = Client(server)
    client.send_message("T")
    phys = server.store.message_at("T", 0, 0).physical_offset
    for group in (UP, "g" * 256, ""):
        answer = client.call(C.CONSUMER_SEND_MSG_BACK, offset=phys, group=group, delay_level=-1)
        expected = (R.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group} "
                    "\nSee http://rocketmq.apache.org/docs/faq/ for further details.")  # the reference's text
        assert (answer.code, answer.remark) == expected
    assert server.topics.get(f"%DLQ%{UP}") is None and server.topics.get(f"%RETRY%{UP}") is None
    assert_nothing_outside_the_store(tmp_path, f"%DLQ%{UP}", f"%RETRY%{UP}")


def test_offsets_and_pulls_under_a_bad_group_are_refused(broker) -> None:
    server, _reactor, tmp_path = broker
    client = Client(server)
    client.send_message("T")
    update = client.call(C.UPDATE_CONSUMER_OFFSET, consumer_group=UP, topic="T", queue_id=0, commit_offset=1)
    assert (update.code, update.remark) == (R.SUBSCRIPTION_GROUP_NOT_EXIST, f"Group {UP} not exist!")
    answer = client.answer(client.pull_message("T", 0, group=UP, sys_flag=0x1, commit_offset=1))
    assert answer.code == R.SUBSCRIPTION_GROUP_NOT_EXIST
    assert server.store.offsets.table() == {}
    assert_nothing_outside_the_store(tmp_path)


@pytest.mark.parametrize(
    ("topic", "remark"),
    [
        (UP, "contains illegal characters"),
        ("%DLQ%", "the specified group is blank"),
        ("%RETRY%" + "g" * 200, "longer than topic max length 127"),
        ("t" * 128, "longer than topic max length 127"),
    ],
)
def test_update_topic_refuses_bad_names(broker, topic: str, remark: str) -> None:
    server, _reactor, tmp_path = broker
    answer = Client(server).call(
        C.UPDATE_AND_CREATE_TOPIC, topic=topic, default_topic="TBW102", read_queue_nums=4, write_queue_nums=4,
        perm=6, topic_filter_type="SINGLE_TAG", order=False,
    )  # fmt: skip
    assert answer.code == R.SYSTEM_ERROR and remark in answer.remark
    assert server.topics.get(topic) is None
    assert_nothing_outside_the_store(tmp_path, topic)


@pytest.mark.parametrize(("topic", "remark"), [(UP, "illegal characters"), ("%DLQ%", "the specified group is blank")])
def test_a_send_to_a_bad_topic_is_refused_before_any_file(broker, topic: str, remark: str) -> None:
    server, _reactor, tmp_path = broker
    answer = Client(server).send_message(topic)  # auto-create from TBW102
    assert answer.code == R.SYSTEM_ERROR and remark in answer.remark
    assert server.topics.get(topic) is None
    assert_nothing_outside_the_store(tmp_path, topic)


def test_locks_take_only_real_queues_under_a_valid_group(broker) -> None:
    server, _reactor, _tmp_path = broker
    client = Client(server)
    client.send_message("T")
    made_up = [MessageQueue(f"NoSuchTopic{i}", "rmqproxy-a", 0) for i in range(1000)]
    other_broker = [MessageQueue("T", "broker-b", 0)]
    out_of_range = [MessageQueue("T", "rmqproxy-a", 99)]
    real = [MessageQueue("T", "rmqproxy-a", 1)]
    body = LockBatchRequestBody("og", "c@1", None, made_up + other_broker + out_of_range + real)
    held = LockBatchResponseBody.from_json(client.call(C.LOCK_BATCH_MQ, body=body.to_json()).body)
    assert held.lock_ok_mq_set == real
    assert server.locks.tables == {"og": {real[0]: server.locks.tables["og"][real[0]]}}
    bad = client.call(C.LOCK_BATCH_MQ, body=LockBatchRequestBody(UP, "c@1", None, real).to_json())
    assert bad.code == R.SUBSCRIPTION_GROUP_NOT_EXIST and UP not in server.locks.tables


def test_the_store_refuses_a_consume_queue_outside_itself(broker) -> None:
    """Defence in depth: whatever name reaches the store, it creates no folder outside it."""
    server, _reactor, tmp_path = broker
    for topic in (UP, "..", "a/b", "/tmp/x"):
        with pytest.raises(ValueError, match="outside the store"):
            server.store.queue_table.directory(topic, 0)
        ticket = server.store.put(Message(topic, b"x", {}, queue_id=0))
        assert ticket.result.status == PutStatus.MESSAGE_ILLEGAL and "outside the store" in ticket.result.remark
    assert_nothing_outside_the_store(tmp_path)
