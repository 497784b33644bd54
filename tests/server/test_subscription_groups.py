"""Subscription groups (issue 30): the table mqadmin updateSubGroup / deleteSubGroup /
getConsumerConfig and the console read and write (200, 201, 207, 352), kept across restarts, and
each field honoured where the reference honours it: pulls, heartbeats, send-backs and retry sends."""

from __future__ import annotations

import json
import random

import pytest

from codec.bodies import (
    ConsumerData,
    HeartbeatData,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicRouteData,
    build_subscription,
)
from codec.codes import PullSysFlag, RequestCode as C
from codec.codes import ResponseCode as R
from codec.headers import PullMessageResponseHeader, SendMessageResponseHeader

from .harness import Client, make_server

FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
#: What 4.9.7 ``mqadmin updateSubGroup -g G4`` sends (fastjson, no 5.x fields).
BODY_49 = (b'{"brokerId":0,"consumeBroadcastEnable":false,"consumeEnable":true,"consumeFromMinEnable":false,'
           b'"groupName":"G4","notifyConsumerIdsChangedEnable":true,"retryMaxTimes":16,"retryQueueNums":1,'
           b'"whichBrokerWhenConsumeSlowly":1}')  # fmt: skip
#: What 5.3.x ``mqadmin updateSubGroup -g G5`` sends.
BODY_5X = (b'{"attributes":{},"brokerId":0,"consumeBroadcastEnable":false,"consumeEnable":true,'
           b'"consumeFromMinEnable":false,"consumeMessageOrderly":false,"consumeTimeoutMinute":15,"groupName":"G5",'
           b'"groupRetryPolicy":{"type":"CUSTOMIZED"},"groupSysFlag":0,"notifyConsumerIdsChangedEnable":true,'
           b'"retryMaxTimes":16,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1}')  # fmt: skip


@pytest.fixture
def broker(servers):
    return servers(message_delay_level="1s 2s 3s")


def update(client: Client, group: str, **fields) -> object:
    return client.call(C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=SubscriptionGroupConfig(group, **fields).to_json())


def all_groups(client: Client) -> SubscriptionGroupWrapper:
    answer = client.call(C.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    assert answer.code == R.SUCCESS
    return SubscriptionGroupWrapper.from_json(answer.body)


def heartbeat(client: Client, group: str, model: str = "CLUSTERING", topic: str = "T") -> None:
    consumer = ConsumerData(group, "CONSUME_PASSIVELY", model, "CONSUME_FROM_FIRST_OFFSET",
                            [build_subscription(topic, "*", 1)], False)  # fmt: skip
    data = HeartbeatData(client.client_id, [], [consumer])
    assert client.call(C.HEART_BEAT, body=data.to_json()).code == R.SUCCESS


def pulled(client: Client, topic: str, group: str, offset: int = 0):
    return client.answer(client.pull_message(topic, offset, group=group))


def send_back(client: Client, server, topic: str, group: str, **fields):
    stored = SendMessageResponseHeader.from_ext(client.send_message(topic, b"payload").ext_fields)
    phys = server.store.message_at(topic, stored.queue_id, stored.queue_offset).physical_offset
    return client.call(C.CONSUMER_SEND_MSG_BACK, offset=phys, group=group, delay_level=fields.pop("delay_level", 1),
                       **fields)  # fmt: skip


# --- the admin codes ------------------------------------------------------------------------


def test_create_get_list_and_delete_as_mqadmin_and_the_console_do(broker) -> None:
    server, _ = broker
    client = Client(server)
    before = all_groups(client)
    assert {"TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP"} <= set(before.subscription_group_table)
    assert client.call(C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=BODY_49).code == R.SUCCESS
    assert client.call(C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=BODY_5X).code == R.SUCCESS
    after = all_groups(client)
    assert after.data_version.counter == before.data_version.counter + 2
    g4 = after.subscription_group_table["G4"]
    assert (g4.consume_broadcast_enable, g4.consume_from_min_enable, g4.retry_max_times, g4.retry_queue_nums) == (
        False, False, 16, 1)
    assert g4.group_retry_policy.type == "CUSTOMIZED" and g4.consume_timeout_minute == 15  # 5.x defaults filled in
    one = client.call(C.GET_SUBSCRIPTIONGROUP_CONFIG, group="G5")
    assert one.code == R.SUCCESS and json.loads(one.body) == json.loads(BODY_5X)
    missing = client.call(C.GET_SUBSCRIPTIONGROUP_CONFIG, group="nope")
    assert (missing.code, missing.remark) == (R.SYSTEM_ERROR, "No group in this broker")
    assert update(client, "G4", retry_max_times=3).code == R.SUCCESS  # an update replaces the whole config
    assert all_groups(client).subscription_group_table["G4"].retry_max_times == 3
    assert client.call(C.DELETE_SUBSCRIPTIONGROUP, group_name="G4").code == R.SUCCESS
    assert client.call(C.DELETE_SUBSCRIPTIONGROUP, group_name="G4").code == R.SUCCESS  # gone already: still SUCCESS
    assert "G4" not in all_groups(client).subscription_group_table
    assert client.call(C.GET_SUBSCRIPTIONGROUP_CONFIG, group="G4").code == R.SYSTEM_ERROR


def test_delete_drops_the_groups_offsets_only_when_asked(broker) -> None:
    server, _ = broker
    client = Client(server)
    client.send_message("T", b"x")
    for group in ("keep", "drop49", "drop5x"):
        assert update(client, group).code == R.SUCCESS
        assert client.call(C.UPDATE_CONSUMER_OFFSET, consumer_group=group, topic="T", queue_id=0, commit_offset=1).code == 0
    client.call(C.DELETE_SUBSCRIPTIONGROUP, group_name="keep")
    client.call(C.DELETE_SUBSCRIPTIONGROUP, group_name="drop49", remove_offset=True)  # 4.9 tools
    client.call(C.DELETE_SUBSCRIPTIONGROUP, group_name="drop5x", clean_offset=True)  # 5.x tools
    assert server.store.offsets.query("keep", "T", 0) == 1
    assert server.store.offsets.query("drop49", "T", 0) is None
    assert server.store.offsets.query("drop5x", "T", 0) is None


def test_groups_survive_a_restart_in_the_references_file(servers, tmp_path) -> None:
    server, _ = make_server(tmp_path)
    client = Client(server)
    assert update(client, "kept", retry_max_times=3, retry_queue_nums=2, consume_enable=False).code == R.SUCCESS
    version = all_groups(client).data_version
    server.stop()
    on_disk = json.loads((tmp_path / "store" / "config" / "subscriptionGroup.json").read_text())
    assert set(on_disk) == {"subscriptionGroupTable", "dataVersion"}
    assert on_disk["subscriptionGroupTable"]["kept"]["retryMaxTimes"] == 3
    again, _ = servers(tmp_path, started_after_s=5)
    table = all_groups(Client(again))
    kept = table.subscription_group_table["kept"]
    assert (kept.retry_max_times, kept.retry_queue_nums, kept.consume_enable) == (3, 2, False)
    assert table.data_version.counter == version.counter and table.data_version.timestamp == version.timestamp


@pytest.mark.parametrize(("table", "reason"), [
    ({"g": {"retryMaxTimes": "many"}}, "not a subscription group table"),
    ({"g": {"attributes": {"+x": "1"}}}, "group 'g' cannot be served as configured: group attributes"),
    ({"bad name": {}}, "illegal characters"),
])  # fmt: skip
def test_a_damaged_or_unservable_group_file_stops_the_start_naming_it(tmp_path, table, reason) -> None:
    path = tmp_path / "store" / "config" / "subscriptionGroup.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"subscriptionGroupTable": table}))
    with pytest.raises(ValueError, match="subscriptionGroup.json") as refused:
        make_server(tmp_path)
    assert reason in str(refused.value)


@pytest.mark.parametrize(("fields", "reason"), [
    ({"retry_queue_nums": 1025}, "retryQueueNums must be within [0, 1024]"),
    ({"retry_queue_nums": -1}, "retryQueueNums must be within"),
    ({"retry_max_times": -1}, "retryMaxTimes must be 0 or more"),
    ({"broker_id": -1}, "brokerId"),
    ({"consume_timeout_minute": 0}, "consumeTimeoutMinute"),
    ({"attributes": {"+x": "y"}}, "group attributes"),
    ({"group_sys_flag": 1}, "groupSysFlag"),
])  # fmt: skip
def test_a_config_that_cannot_be_kept_is_refused_not_stored(broker, fields, reason) -> None:
    client = Client(broker[0])
    answer = update(client, "refused", **fields)
    assert answer.code == R.SYSTEM_ERROR and reason in answer.remark
    assert "refused" not in all_groups(client).subscription_group_table


@pytest.mark.parametrize("body", [
    b'{"groupName":"p","groupRetryPolicy":{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":1000,"max":60000,"multiplier":2}}}',
    b'{"groupName":"p","groupRetryPolicy":{"type":"CUSTOMIZED","customizedRetryPolicy":{"next":[1000,5000]}}}',
])  # fmt: skip
def test_a_group_retry_policy_other_than_the_default_is_refused(broker, body) -> None:
    client = Client(broker[0])
    answer = client.call(C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
    assert answer.code == R.SYSTEM_ERROR and "groupRetryPolicy is not supported" in answer.remark


@pytest.mark.parametrize(("body", "reason"), [
    (b"", "no SubscriptionGroupConfig"),
    (b"[1]", "expected an object"),
    (b'{"groupName":"g","retryMaxTimes":"lots"}', "retryMaxTimes"),
    (b'{"retryMaxTimes":1}', "blank"),
    (b'{"groupName":"bad name!"}', "illegal characters"),
    (b'{"groupName":"' + b"g" * 256 + b'"}', "longer than group max length 255"),
])  # fmt: skip
def test_bad_bodies_and_names_get_a_clear_error(broker, body, reason) -> None:
    client = Client(broker[0])
    answer = client.call(C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
    assert answer.code != R.SUCCESS and reason in answer.remark
    bad_delete = client.call(C.DELETE_SUBSCRIPTIONGROUP, group_name="bad name!")
    assert bad_delete.code == R.SYSTEM_ERROR and "illegal characters" in bad_delete.remark


def test_the_table_is_bounded_for_updates_and_auto_creation(servers, tmp_path) -> None:
    server, _ = servers(tmp_path, max_subscription_groups=9)  # the 7 built-in groups and 2 more
    client = Client(server)
    assert update(client, "one").code == R.SUCCESS
    heartbeat(client, "two")
    refused = update(client, "three")
    assert refused.code == R.SYSTEM_ERROR and "maxSubscriptionGroups" in refused.remark
    assert update(client, "one", retry_max_times=2).code == R.SUCCESS  # a known group may still change
    client.send_message("T")
    full = pulled(client, "T", "four")
    assert full.code == R.SUBSCRIPTION_GROUP_NOT_EXIST and "maxSubscriptionGroups" in full.remark
    assert len(all_groups(client).subscription_group_table) == 9


# --- autoCreateSubscriptionGroup ----------------------------------------------------------


def test_an_unknown_group_is_created_on_first_use_and_persisted(broker) -> None:
    server, _ = broker
    client = Client(server)
    heartbeat(client, "by-heartbeat")
    client.send_message("T")
    assert pulled(client, "T", "by-pull").code == R.SUCCESS
    assert send_back(client, server, "T", "by-send-back").code == R.SUCCESS
    table = all_groups(client).subscription_group_table
    assert {"by-heartbeat", "by-pull", "by-send-back"} <= set(table)
    assert table["by-pull"] == SubscriptionGroupConfig("by-pull")  # the reference's defaults
    server.groups.close()
    on_disk = json.loads((server.config.store_dir / "config" / "subscriptionGroup.json").read_text())
    assert {"by-heartbeat", "by-pull", "by-send-back"} <= set(on_disk["subscriptionGroupTable"])


def test_without_auto_create_an_unknown_group_is_refused_as_the_reference_refuses_it(servers, tmp_path) -> None:
    server, _ = servers(tmp_path, auto_create_group=False, message_delay_level="1s 2s 3s")
    client = Client(server)
    client.send_message("T")
    refused = pulled(client, "T", "stranger")
    assert (refused.code, refused.remark) == (R.SUBSCRIPTION_GROUP_NOT_EXIST,
                                              f"subscription group [stranger] does not exist, {FAQ}")
    back = send_back(client, server, "T", "stranger")
    assert (back.code, back.remark) == (R.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, stranger {FAQ}")
    heartbeat(client, "stranger")  # registered as 4.9.8 registers it, but not created, and no retry topic
    assert server.clients.consumer_group("stranger") is not None
    assert server.topics.get("%RETRY%stranger") is None
    route = client.call(C.GET_ROUTEINFO_BY_TOPIC, topic="%RETRY%stranger")
    assert route.code == R.TOPIC_NOT_EXIST
    retry = client.send_message("%RETRY%stranger", reconsume_times=1)
    assert retry.code == R.SUBSCRIPTION_GROUP_NOT_EXIST
    assert "stranger" not in all_groups(client).subscription_group_table
    assert update(client, "known").code == R.SUCCESS  # created by mqadmin: served
    assert pulled(client, "T", "known").code == R.SUCCESS
    assert pulled(client, "T", "CID_RMQ_SYS_x").code == R.SUCCESS  # system groups are always created


# --- the fields, honoured -------------------------------------------------------------------


def test_consume_enable_false_refuses_pulls_until_enabled(broker) -> None:
    server, _ = broker
    client = Client(server)
    client.send_message("T")
    assert update(client, "off", consume_enable=False).code == R.SUCCESS
    refused = pulled(client, "T", "off")
    assert (refused.code, refused.remark) == (R.NO_PERMISSION, "subscription group no permission, off")
    assert update(client, "off").code == R.SUCCESS
    assert pulled(client, "T", "off").code == R.SUCCESS


def test_a_held_pull_of_a_group_disabled_meanwhile_wakes_to_the_refusal_not_the_message(broker) -> None:
    """The reference re-runs a woken pull: consumeEnable=false set while a pull is held stops it too."""
    server, _ = broker
    consumer, admin = Client(server, "c@1"), Client(server, "admin@1")
    admin.send_message("T")
    opaque = consumer.pull_message("T", 1, group="held", sys_flag=PullSysFlag.SUSPEND)
    assert consumer.answer(opaque) is None and server.holds.count == 1
    assert update(admin, "held", consume_enable=False).code == R.SUCCESS
    admin.send_message("T")  # wakes the held pull
    answer = consumer.answer(opaque)
    assert (answer.code, answer.remark) == (R.NO_PERMISSION, "subscription group no permission, held")
    assert server.holds.count == 0


def test_consume_broadcast_enable_false_refuses_a_broadcast_consumer_only(broker) -> None:
    server, _ = broker
    client = Client(server)
    client.send_message("T")
    assert client.call(C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=BODY_49).code == R.SUCCESS  # broadcast off
    heartbeat(client, "G4", "BROADCASTING")
    refused = pulled(client, "T", "G4")
    assert (refused.code, refused.remark) == (R.NO_PERMISSION, "the consumer group[G4] can not consume by broadcast way")
    heartbeat(Client(server, "c@2"), "G5", "BROADCASTING")  # auto-created: broadcast on by default
    assert pulled(client, "T", "G5").code == R.SUCCESS
    other = Client(server, "c@3")
    heartbeat(other, "G4", "CLUSTERING")
    assert pulled(other, "T", "G4").code == R.SUCCESS


def test_send_back_uses_the_request_max_else_the_groups_retry_max_times(broker) -> None:
    server, reactor = broker
    client = Client(server)
    assert update(client, "few", retry_max_times=1).code == R.SUCCESS
    assert send_back(client, server, "T", "few").code == R.SUCCESS
    reactor.advance(1.0)
    retried = server.store.message_at("%RETRY%few", 0, 0)
    assert retried.reconsume_times == 1
    again = client.call(C.CONSUMER_SEND_MSG_BACK, offset=retried.physical_offset, group="few", delay_level=0)
    assert again.code == R.SUCCESS and server.store.max_offset("%DLQ%few", 0) == 1  # 1 >= retryMaxTimes 1
    asked = client.call(C.CONSUMER_SEND_MSG_BACK, offset=retried.physical_offset, group="few", delay_level=0,
                        max_reconsume_times=5)  # fmt: skip
    assert asked.code == R.SUCCESS and server.store.max_offset("%DLQ%few", 0) == 1  # the client's 5 wins
    old = Client(server, version=120)  # before 3.4.9 the header's value is not used
    stale = old.call(C.CONSUMER_SEND_MSG_BACK, offset=retried.physical_offset, group="few", delay_level=0,
                     max_reconsume_times=5)  # fmt: skip
    assert stale.code == R.SUCCESS and server.store.max_offset("%DLQ%few", 0) == 2


def test_a_retry_send_goes_to_the_dlq_past_the_groups_retry_max_times(broker) -> None:
    server, _ = broker
    client = Client(server)
    assert update(client, "few", retry_max_times=2).code == R.SUCCESS
    server.topics.ensure("%RETRY%few")
    assert client.send_message("%RETRY%few", b"r", reconsume_times=1).code == R.SUCCESS
    assert server.store.max_offset("%DLQ%few", 0) == 0
    assert client.send_message("%RETRY%few", b"r", reconsume_times=2).code == R.SUCCESS
    assert server.store.max_offset("%DLQ%few", 0) == 1


def test_retry_queue_nums_sizes_the_retry_topic_and_zero_drops_send_backs(broker, monkeypatch) -> None:
    server, reactor = broker
    client = Client(server)
    assert update(client, "wide", retry_queue_nums=4).code == R.SUCCESS
    heartbeat(client, "wide")
    assert server.topics.get("%RETRY%wide").write_queue_nums == 4
    assert update(client, "routed", retry_queue_nums=3).code == R.SUCCESS
    route = TopicRouteData.from_json(client.call(C.GET_ROUTEINFO_BY_TOPIC, topic="%RETRY%routed").body)
    assert route.queue_datas[0].write_queue_nums == 3
    monkeypatch.setattr(random, "randrange", lambda n: n - 1)
    assert send_back(client, server, "T", "wide").code == R.SUCCESS
    reactor.advance(1.0)
    assert server.store.max_offset("%RETRY%wide", 3) == 1  # a queue of the four, not always 0
    assert update(client, "none", retry_queue_nums=0).code == R.SUCCESS
    dropped = send_back(client, server, "T", "none")
    assert dropped.code == R.SUCCESS  # the reference's answer: no retry, no error
    heartbeat(client, "none")
    reactor.advance(5.0)
    assert server.topics.get("%RETRY%none") is None and server.topics.get("%DLQ%none") is None


def test_suggest_which_broker_id_stays_the_master_whatever_broker_id_says(broker) -> None:
    server, _ = broker
    client = Client(server)
    client.send_message("T")
    assert update(client, "slave-minded", broker_id=1, which_broker_when_consume_slowly=1).code == R.SUCCESS
    answer = pulled(client, "T", "slave-minded")
    assert answer.code == R.SUCCESS
    assert PullMessageResponseHeader.from_ext(answer.ext_fields).suggest_which_broker_id == 0
    assert all_groups(client).subscription_group_table["slave-minded"].broker_id == 1  # kept as set


def test_notify_consumer_ids_changed_enable_false_keeps_members_unnotified(broker) -> None:
    server, _ = broker
    first, second = Client(server, "b@1#1"), Client(server, "a@1#1")
    assert update(first, "quiet", notify_consumer_ids_changed_enable=False).code == R.SUCCESS
    heartbeat(first, "quiet")
    first.read()
    heartbeat(second, "quiet")
    second.call(C.UNREGISTER_CLIENT, client_id="a@1#1", consumer_group="quiet")
    assert not [c for c in first.read() if c.code == C.NOTIFY_CONSUMER_IDS_CHANGED]
    heartbeat(first, "loud")
    first.read()
    heartbeat(second, "loud")
    assert [c for c in first.read() if c.code == C.NOTIFY_CONSUMER_IDS_CHANGED]


def test_an_orderly_group_is_kept_for_fifo_grpc_consumers(broker) -> None:
    client = Client(broker[0])
    assert update(client, "fifo", consume_message_orderly=True).code == R.SUCCESS
    assert all_groups(client).subscription_group_table["fifo"].consume_message_orderly
