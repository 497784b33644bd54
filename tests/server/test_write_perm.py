"""wipeWritePerm (205) and addWritePerm (327): the broker's write switch, honoured by routes, sends,
batches, send-backs and replies, kept over a restart (docs/operations.md, "Write permission")."""

from __future__ import annotations

import json

import pytest

from codec.bodies import TopicRouteData
from codec.codes import RequestCode as C
from codec.codes import ResponseCode as R
from codec.headers import (
    AddWritePermOfBrokerResponseHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from codec.message import BatchItem, encode_batch
from rmqproxy.core.config import Config
from rmqproxy.broker.permission import BrokerPermission

from .harness import Client, send_header

WAIT = "WAIT\x01true"
FORBIDDEN = "the broker[127.0.0.1] sending message is forbidden"


def route_perm(client: Client, topic: str) -> int:
    answer = client.call(C.GET_ROUTEINFO_BY_TOPIC, topic=topic)
    assert answer.code == R.SUCCESS, answer.remark
    (queue,) = TopicRouteData.from_json(answer.body).queue_datas
    return queue.perm


def wipe(client: Client, broker: str = "rmqproxy-a") -> int:
    answer = client.call(C.WIPE_WRITE_PERM_OF_BROKER, broker_name=broker)
    assert answer.code == R.SUCCESS, answer.remark
    return WipeWritePermOfBrokerResponseHeader.from_ext(answer.ext_fields).wipe_topic_count


def add(client: Client, broker: str = "rmqproxy-a") -> int:
    answer = client.call(C.ADD_WRITE_PERM_OF_BROKER, broker_name=broker)
    assert answer.code == R.SUCCESS, answer.remark
    return AddWritePermOfBrokerResponseHeader.from_ext(answer.ext_fields).add_topic_count


def test_wipe_hides_write_queues_refuses_writes_and_add_restores_both(broker) -> None:
    server, _ = broker
    client = Client(server)
    assert client.call(C.SEND_MESSAGE_V2, send_header("Orders", props=WAIT), b"before").code == R.SUCCESS
    assert route_perm(client, "Orders") == 6

    assert wipe(client) == len(server.topics.topics)
    assert route_perm(client, "Orders") == 4
    assert route_perm(client, "TBW102") == 5  # READ and INHERIT stay
    refused = client.call(C.SEND_MESSAGE_V2, send_header("Orders", props=WAIT), b"during")
    assert (refused.code, refused.remark) == (R.NO_PERMISSION, FORBIDDEN)
    new_topic = client.call(C.SEND_MESSAGE, send_header("Brand_New", props=WAIT), b"during")
    assert (new_topic.code, new_topic.remark) == (R.NO_PERMISSION, FORBIDDEN)
    assert server.topics.get("Brand_New") is None  # refused before auto-create
    batch = client.call(C.SEND_BATCH_MESSAGE, send_header("Orders", props=WAIT, batch=True),
                        encode_batch([BatchItem(b"a", {}), BatchItem(b"b", {})]))  # fmt: skip
    assert (batch.code, batch.remark) == (R.NO_PERMISSION, FORBIDDEN)
    assert server.store.max_offset("Orders", 0) == 1

    assert add(client) == len(server.topics.topics)
    assert route_perm(client, "Orders") == 6
    assert client.call(C.SEND_MESSAGE_V2, send_header("Orders", props=WAIT), b"after").code == R.SUCCESS
    assert server.store.max_offset("Orders", 0) == 2


def test_send_back_and_reply_are_refused_while_wiped(broker) -> None:
    server, _ = broker
    client = Client(server)
    sent = client.call(C.SEND_MESSAGE_V2, send_header("Orders", props=WAIT), b"m")
    wipe(client)
    phys = server.store.message_at("Orders", 0, 0).physical_offset
    back = client.call(C.CONSUMER_SEND_MSG_BACK, offset=phys, group="cg", delay_level=1, max_reconsume_times=3)
    assert (back.code, back.remark) == (R.NO_PERMISSION, FORBIDDEN)
    assert server.store.max_offset("%RETRY%cg", 0) == 0
    reply = client.call(C.SEND_REPLY_MESSAGE_V2, send_header("DefaultCluster_REPLY_TOPIC", props=WAIT), b"r")
    assert (reply.code, reply.remark) == (R.NO_PERMISSION, FORBIDDEN)
    assert sent.code == R.SUCCESS


def test_pulls_still_serve_what_is_stored_while_wiped(broker) -> None:
    server, _ = broker
    client = Client(server)
    client.call(C.SEND_MESSAGE_V2, send_header("Orders", props=WAIT), b"m")
    wipe(client)
    answer = client.call(C.PULL_MESSAGE, consumer_group="cg", topic="Orders", queue_id=0, queue_offset=0,
                         max_msg_nums=32, sys_flag=0, commit_offset=0, suspend_timeout_millis=0, sub_version=0)  # fmt: skip
    assert answer.code == R.SUCCESS


def test_another_broker_name_changes_nothing_and_counts_zero(broker) -> None:
    server, _ = broker
    client = Client(server)
    assert wipe(client, "broker-b") == 0
    assert server.permission.writable
    assert client.call(C.SEND_MESSAGE_V2, send_header("Orders", props=WAIT), b"m").code == R.SUCCESS


def test_a_missing_broker_name_is_refused_with_its_field_named(broker) -> None:
    server, _ = broker
    client = Client(server)
    answer = client.call(C.WIPE_WRITE_PERM_OF_BROKER, ext={})
    assert answer.code == R.SYSTEM_ERROR and "brokerName" in answer.remark
    assert server.permission.writable


def test_a_wiped_broker_stays_wiped_over_a_restart_until_add(servers, tmp_path) -> None:
    server, _ = servers(tmp_path)
    wipe(Client(server))
    server.stop()
    server, _ = servers(tmp_path)
    client = Client(server)
    assert client.call(C.SEND_MESSAGE_V2, send_header("Orders", props=WAIT), b"m").code == R.NO_PERMISSION
    add(client)
    server.stop()
    server, _ = servers(tmp_path)
    assert Client(server).call(C.SEND_MESSAGE_V2, send_header("Orders", props=WAIT), b"m").code == R.SUCCESS


def test_broker_conf_changed_since_the_wipe_wins(tmp_path) -> None:
    path = tmp_path / "brokerPermission.json"
    BrokerPermission(path, 6).wipe_write()
    assert json.loads(path.read_text()) == {"brokerPermission": 4, "configured": 6}
    assert BrokerPermission(path, 6).perm == 4
    assert BrokerPermission(path, 2).perm == 2  # the operator edited broker.conf since: it wins


def test_broker_permission_without_read_refuses_pulls_and_routes_show_it(servers, tmp_path) -> None:
    server, _ = servers(tmp_path, broker_permission=2)
    client = Client(server)
    assert client.call(C.SEND_MESSAGE_V2, send_header("Orders", props=WAIT), b"m").code == R.SUCCESS
    assert route_perm(client, "Orders") == 2
    answer = client.call(C.PULL_MESSAGE, consumer_group="cg", topic="Orders", queue_id=0, queue_offset=0,
                         max_msg_nums=32, sys_flag=0, commit_offset=0, suspend_timeout_millis=0,
                         sub_version=0)  # fmt: skip
    assert (answer.code, answer.remark) == (R.NO_PERMISSION, "the broker[127.0.0.1] pulling message is forbidden")


@pytest.mark.parametrize("bad", [-1, 8, 16])
def test_broker_permission_out_of_range_stops_the_start(bad: int) -> None:
    with pytest.raises(ValueError, match="brokerPermission"):
        Config(broker_permission=bad)
