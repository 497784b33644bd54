"""The broker and name-server roles end to end on a fake reactor: real store, typed requests,
the responses a Java client would get (docs/protocol.md)."""

from __future__ import annotations

import json

import pytest

from codec.bodies import (
    GetConsumerListByGroupResponseBody,
    TopicRouteData,
)
from codec.codes import FLAG_ONEWAY, PullSysFlag
from codec.codes import RequestCode as C
from codec.codes import ResponseCode as R
from codec.headers import PullMessageResponseHeader, SendMessageResponseHeader
from codec.message import BatchItem, decode_messages, encode_batch

from .harness import Client, send_header


@pytest.fixture
def broker(servers):
    return servers(message_delay_level="1s 2s 3s")


@pytest.mark.parametrize(("metrics_host", "expected"), [("", "10.1.2.3"), ("0.0.0.0", "0.0.0.0")])
def test_metrics_listen_on_the_bind_address_unless_metrics_prom_exporter_host_is_set(servers, 
    tmp_path, metrics_host: str, expected: str
) -> None:
    server, reactor = servers(tmp_path, bind_address="10.1.2.3", metrics_port=5557, metrics_host=metrics_host)
    assert reactor.listening == [("10.1.2.3", 9876), ("10.1.2.3", 9874), (expected, 5557)]  # 9874: the fast port


def test_unknown_topic_route_is_topic_not_exist(broker) -> None:
    answer = Client(broker[0]).call(C.GET_ROUTEINFO_BY_TOPIC, topic="Nope")
    assert answer.code == R.TOPIC_NOT_EXIST and answer.remark.startswith("No topic route info in name server")


def test_a_retry_topic_routes_before_its_groups_first_heartbeat(broker) -> None:
    answer = Client(broker[0]).call(C.GET_ROUTEINFO_BY_TOPIC, topic="%RETRY%fresh")
    route = TopicRouteData.from_json(answer.body)
    assert answer.code == R.SUCCESS and (route.queue_datas[0].read_queue_nums, route.queue_datas[0].perm) == (1, 6)


def test_tbw102_routes_inheritable_for_auto_create_in_both_key_forms(broker) -> None:
    modern = Client(broker[0], version=409).call(C.GET_ROUTEINFO_BY_TOPIC, topic="TBW102")
    legacy = Client(broker[0], version=317).call(C.GET_ROUTEINFO_BY_TOPIC, topic="TBW102")
    assert b'"brokerAddrs":{"0":"127.0.0.1:9876"}' in modern.body
    assert b'"brokerAddrs":{0:"127.0.0.1:9876"}' in legacy.body
    route = TopicRouteData.from_json(modern.body)
    assert (route.queue_datas[0].perm, route.queue_datas[0].write_queue_nums) == (7, 8)


def test_first_send_auto_creates_the_topic_as_java_producers_expect(broker) -> None:
    client = Client(broker[0])
    answer = client.send_message("NewTopic", b"hello", queue_id=3, tags="TagA")
    assert answer.code == R.SUCCESS and answer.ext_fields["MSG_REGION"] == "DefaultRegion"
    header = SendMessageResponseHeader.from_ext(answer.ext_fields)
    assert (header.queue_id, header.queue_offset, len(header.msg_id)) == (3, 0, 32)
    route = TopicRouteData.from_json(client.call(C.GET_ROUTEINFO_BY_TOPIC, topic="NewTopic").body)
    assert (route.queue_datas[0].read_queue_nums, route.queue_datas[0].perm) == (4, 6)
    store = broker[0].store
    (stored,) = decode_messages(store.read_record(store.message_at("NewTopic", 3, 0).physical_offset))
    assert stored.properties == {"TAGS": "TagA", "CLUSTER": "DefaultCluster"}  # WAIT dropped, CLUSTER added
    assert stored.offset_msg_id == header.msg_id and stored.born_host.host == "10.0.0.5"


def test_send_checks_topic_queue_and_auto_create(servers, tmp_path) -> None:
    server, _ = servers(tmp_path, auto_create_topic=False)
    client = Client(server)
    answer = client.send_message("Missing")
    assert answer.code == R.TOPIC_NOT_EXIST and answer.remark == "topic[Missing] not exist, apply first please!"
    assert client.send_message("bad topic!").code == R.SYSTEM_ERROR
    server.topics.ensure("Small", queues=2)
    assert client.send_message("Small", queue_id=2).code == R.SYSTEM_ERROR
    assert client.send_message("Small", queue_id=-1).code == R.SUCCESS  # the broker picks a queue


def test_batch_items_get_consecutive_offsets_and_keep_their_own_properties(broker) -> None:
    client = Client(broker[0])
    items = [BatchItem(f"b{i}".encode(), {"KEYS": f"k{i}", "UNIQ_KEY": f"U{i}", "WAIT": "true"}) for i in range(3)]
    header = send_header("Batchy", 1, "WAIT\x01true\x02UNIQ_KEY\x01BATCH", batch=True)
    answer = client.call(C.SEND_BATCH_MESSAGE, header, encode_batch(items))
    parsed = SendMessageResponseHeader.from_ext(answer.ext_fields)
    assert answer.code == R.SUCCESS and parsed.queue_offset == 0 and len(parsed.msg_id.split(",")) == 3
    stored = [broker[0].store.message_at("Batchy", 1, i) for i in range(3)]
    assert [m.properties["UNIQ_KEY"] for m in stored] == ["U0", "U1", "U2"]  # not the batch's (#9416)
    assert all("WAIT" not in m.properties and m.properties["CLUSTER"] == "DefaultCluster" for m in stored)


def test_pull_without_a_registered_subscription_is_served_unfiltered(broker) -> None:
    client = Client(broker[0])
    client.send_message("T", b"a", tags="TagA")
    client.send_message("T", b"b", tags="TagB")
    answer = client.answer(client.pull_message("T", 0))  # no heartbeat yet (e.g. right after a restart)
    assert answer.code == R.SUCCESS and len(decode_messages(answer.body)) == 2
    client.heartbeat("cg", {"T": "TagA"})
    newer = client.answer(client.pull_message("T", 0, sub_version=2))  # the client's subscription is newer
    assert len(decode_messages(newer.body)) == 2  # unfiltered: the client filters by tag itself
    answer = client.answer(client.pull_message("T", 0, sys_flag=PullSysFlag.SUBSCRIPTION, subscription="TagB"))
    assert [m.body for m in decode_messages(answer.body)] == [b"b"]


def test_pull_statuses_map_to_codes_with_all_four_offsets(broker) -> None:
    client = Client(broker[0])
    client.heartbeat("cg", {"T": "*"})
    for i in range(3):
        client.send_message("T", f"m{i}".encode())
    found = client.answer(client.pull_message("T", 1))
    header = PullMessageResponseHeader.from_ext(found.ext_fields)
    assert (found.code, found.remark, header.next_begin_offset, header.min_offset, header.max_offset) == (
        R.SUCCESS, "FOUND", 3, 0, 3
    )  # fmt: skip
    assert [m.body for m in decode_messages(found.body)] == [b"m1", b"m2"]
    at_end = client.answer(client.pull_message("T", 3))  # no SUSPEND flag: answered at once
    assert (at_end.code, at_end.remark, at_end.body) == (R.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE", b"")
    badly = client.answer(client.pull_message("T", 9))
    assert (badly.code, PullMessageResponseHeader.from_ext(badly.ext_fields).next_begin_offset) == (
        R.PULL_OFFSET_MOVED, 3
    )  # fmt: skip
    empty_queue = client.answer(client.pull_message("T", 0, queue_id=2))  # auto-created with 4 queues
    assert empty_queue.code == R.PULL_NOT_FOUND
    moved = client.answer(client.pull_message("T", 4, queue_id=2))
    assert moved.code == R.PULL_OFFSET_MOVED
    assert client.answer(client.pull_message("T", 0, queue_id=99)).code == R.SYSTEM_ERROR


def test_tag_subscription_filters_by_hash(broker) -> None:
    client = Client(broker[0])
    client.heartbeat("cg", {"T": "TagA || TagB"})
    for tag in ("TagA", "TagC", "TagB", None):
        client.send_message("T", (tag or "none").encode(), tags=tag)
    answer = client.answer(client.pull_message("T", 0))
    assert [m.body for m in decode_messages(answer.body)] == [b"TagA", b"TagB"]


def test_held_pull_wakes_at_once_on_a_matching_arrival(broker) -> None:
    server, reactor = broker
    consumer, producer = Client(server, "c@1"), Client(server, "p@1")
    consumer.heartbeat("cg", {"T": "TagA"})
    producer.send_message("T", b"first", tags="TagA")
    opaque = consumer.pull_message("T", 1, sys_flag=PullSysFlag.SUSPEND)
    assert consumer.answer(opaque) is None and server.holds.count == 1
    producer.send_message("T", b"other", tags="TagB")  # does not match: keeps holding
    assert consumer.answer(opaque) is None
    producer.send_message("T", b"wanted", tags="TagA")
    answer = consumer.answer(opaque)
    assert answer.code == R.SUCCESS and [m.body for m in decode_messages(answer.body)] == [b"wanted"]
    assert PullMessageResponseHeader.from_ext(answer.ext_fields).next_begin_offset == 3
    assert server.holds.count == 0


def test_held_pull_times_out_exactly_at_its_deadline(broker) -> None:
    server, reactor = broker
    client = Client(server)
    client.heartbeat("cg", {"T": "*"})
    client.send_message("T")
    opaque = client.pull_message("T", 1, sys_flag=PullSysFlag.SUSPEND, suspend_timeout_millis=15000)
    reactor.advance(14.999)
    assert client.answer(opaque) is None
    reactor.advance(0.001)
    answer = client.answer(opaque)
    assert (answer.code, PullMessageResponseHeader.from_ext(answer.ext_fields).next_begin_offset) == (
        R.PULL_NOT_FOUND, 1
    )  # fmt: skip
    assert server.holds.count == 0


def test_closing_a_connection_drops_its_held_pulls(broker) -> None:
    server, reactor = broker
    client = Client(server)
    client.heartbeat("cg", {"T": "*"})
    client.send_message("T")
    client.pull_message("T", 1, sys_flag=PullSysFlag.SUSPEND)
    assert server.holds.count == 1
    client.conn.connectionLost(None)
    assert server.holds.count == 0


def test_commit_offset_flag_and_offset_queries(broker) -> None:
    client = Client(broker[0])
    client.heartbeat("cg", {"T": "*"})
    for _ in range(5):
        client.send_message("T")
    query = client.call(C.QUERY_CONSUMER_OFFSET, consumer_group="cg", topic="T", queue_id=0)
    assert (query.code, query.ext_fields["offset"]) == (R.SUCCESS, "0")  # new group, queue starts at 0
    strict = client.call(C.QUERY_CONSUMER_OFFSET, consumer_group="cg", topic="T", queue_id=0,
                         set_zero_if_not_found=False)  # fmt: skip
    assert strict.code == R.QUERY_NOT_FOUND
    client.answer(client.pull_message("T", 3, sys_flag=PullSysFlag.COMMIT_OFFSET, commit_offset=2))
    assert client.call(C.QUERY_CONSUMER_OFFSET, consumer_group="cg", topic="T", queue_id=0).ext_fields["offset"] == "2"
    client.send(C.UPDATE_CONSUMER_OFFSET, flag=FLAG_ONEWAY, consumer_group="cg", topic="T", queue_id=0, commit_offset=4)
    assert client.read() == []  # oneway: no answer
    assert client.call(C.QUERY_CONSUMER_OFFSET, consumer_group="cg", topic="T", queue_id=0).ext_fields["offset"] == "4"
    assert client.call(C.GET_MAX_OFFSET, topic="T", queue_id=0).ext_fields["offset"] == "5"
    assert client.call(C.GET_MIN_OFFSET, topic="T", queue_id=0).ext_fields["offset"] == "0"
    search = client.call(C.SEARCH_OFFSET_BY_TIMESTAMP, topic="T", queue_id=0, timestamp=1)
    assert search.ext_fields["offset"] == "0"


def test_membership_changes_notify_the_group_and_lists_are_sorted(broker) -> None:
    server, _ = broker
    first, second = Client(server, "b@1#1"), Client(server, "a@1#1")
    first.heartbeat("cg", {"T": "*"})
    assert server.topics.get("%RETRY%cg") is not None
    first.read()
    second.heartbeat("cg", {"T": "*"})
    notices = [c for c in first.read() if c.code == C.NOTIFY_CONSUMER_IDS_CHANGED]
    assert notices and notices[0].is_oneway and notices[0].ext_fields == {"consumerGroup": "cg"}
    listed = first.call(C.GET_CONSUMER_LIST_BY_GROUP, consumer_group="cg")
    assert GetConsumerListByGroupResponseBody.from_json(listed.body).consumer_id_list == ["a@1#1", "b@1#1"]
    second.conn.connectionLost(None)
    assert any(c.code == C.NOTIFY_CONSUMER_IDS_CHANGED for c in first.read())
    first.call(C.UNREGISTER_CLIENT, client_id="b@1#1", consumer_group="cg")
    empty = Client(server).call(C.GET_CONSUMER_LIST_BY_GROUP, consumer_group="cg")
    assert (empty.code, empty.remark) == (R.SYSTEM_ERROR, "no consumer for this group, cg")


def test_send_back_retries_through_a_delay_level_then_dead_letters(broker) -> None:
    server, reactor = broker
    client = Client(server)
    stored = SendMessageResponseHeader.from_ext(client.send_message("T", b"payload", tags="TagA").ext_fields)
    phys = server.store.message_at("T", 0, stored.queue_offset).physical_offset
    back = client.call(C.CONSUMER_SEND_MSG_BACK, offset=phys, group="cg", delay_level=1, max_reconsume_times=1)
    assert back.code == R.SUCCESS and server.store.max_offset("%RETRY%cg", 0) == 0  # parked for 1 s
    reactor.advance(1.0)  # delivered when due: no polling tick to wait for
    retried = server.store.message_at("%RETRY%cg", 0, 0)
    assert retried.body == b"payload" and retried.reconsume_times == 1
    assert retried.properties["RETRY_TOPIC"] == "T" and retried.properties["ORIGIN_MESSAGE_ID"] == stored.msg_id
    again = client.call(C.CONSUMER_SEND_MSG_BACK, offset=retried.physical_offset, group="cg", delay_level=0,
                        max_reconsume_times=1)  # fmt: skip
    assert again.code == R.SUCCESS
    dead = server.store.message_at("%DLQ%cg", 0, 0)
    assert dead.body == b"payload" and dead.reconsume_times == 2
    route = TopicRouteData.from_json(client.call(C.GET_ROUTEINFO_BY_TOPIC, topic="%DLQ%cg").body)
    assert route.queue_datas[0].perm == 6
    missing = client.call(C.CONSUMER_SEND_MSG_BACK, offset=10**9, group="cg", delay_level=0)
    assert missing.code == R.SYSTEM_ERROR and "look message by offset failed" in missing.remark


def test_client_resend_to_retry_topic_goes_to_dlq_past_max(broker) -> None:
    client = Client(broker[0])
    broker[0].topics.ensure("%RETRY%cg")
    answer = client.send_message("%RETRY%cg", b"r", reconsume_times=3, max_reconsume_times=3)
    assert answer.code == R.SUCCESS and broker[0].store.max_offset("%DLQ%cg", 0) == 1


def test_unknown_codes_and_bad_headers_are_answered_not_fatal(broker) -> None:
    client = Client(broker[0])
    unknown = client.call(4242)
    assert (unknown.code, unknown.remark) == (R.REQUEST_CODE_NOT_SUPPORTED, " request type 4242 not supported")
    opaque = client.send(C.PULL_MESSAGE, ext={"consumerGroup": "g", "topic": "T", "queueId": "x"})
    answer = client.answer(opaque)
    assert answer.code == R.SYSTEM_ERROR and "queueId" in answer.remark
    client.send(4242, flag=FLAG_ONEWAY)
    assert client.read() == []
    assert client.call(C.GET_ROUTEINFO_BY_TOPIC, topic="TBW102").code == R.SUCCESS  # still serving


def test_view_and_query_messages_for_mqadmin(broker) -> None:
    client = Client(broker[0])
    header = SendMessageResponseHeader.from_ext(
        client.call(C.SEND_MESSAGE_V2, send_header("T", 0, "KEYS\x01order-9\x02UNIQ_KEY\x01UQ9"), b"kv").ext_fields
    )
    phys = broker[0].store.message_at("T", 0, 0).physical_offset
    viewed = client.call(C.VIEW_MESSAGE_BY_ID, offset=phys)
    assert decode_messages(viewed.body)[0].offset_msg_id == header.msg_id
    queried = client.call(C.QUERY_MESSAGE, topic="T", key="order-9", max_num=32, begin_timestamp=0,
                          end_timestamp=2**62)  # fmt: skip
    assert [m.body for m in decode_messages(queried.body)] == [b"kv"]
    assert client.call(C.QUERY_MESSAGE, topic="T", key="nope", max_num=32, begin_timestamp=0,
                       end_timestamp=2**62).code == R.QUERY_NOT_FOUND  # fmt: skip
    stats = client.call(C.GET_TOPIC_STATS_INFO, topic="T")
    assert b'"maxOffset":1' in stats.body
    runtime = json.loads(client.call(C.GET_BROKER_RUNTIME_INFO).body)["table"]
    assert runtime["putTps"].count(" ") == 2 and runtime["brokerVersionDesc"] == "V4_9_8"


def test_consumer_running_info_is_forwarded_to_the_consumer(broker) -> None:
    server, reactor = broker
    consumer, admin = Client(server, "c@1#9"), Client(server, "admin")
    consumer.heartbeat("cg", {"T": "*"})
    consumer.read()
    opaque = admin.send(C.GET_CONSUMER_RUNNING_INFO, consumer_group="cg", client_id="c@1#9", jstack_enable=False)
    (forwarded,) = [c for c in consumer.read() if c.code == C.GET_CONSUMER_RUNNING_INFO]
    consumer.conn.dataReceived(forwarded.response(0, body=b'{"properties":{},"statusTable":{}}').encode())
    relayed = admin.answer(opaque)
    assert relayed.code == R.SUCCESS and relayed.body == b'{"properties":{},"statusTable":{}}'
    late = admin.send(C.GET_CONSUMER_RUNNING_INFO, consumer_group="cg", client_id="c@1#9", jstack_enable=False)
    reactor.advance(10)
    assert admin.answer(late).code == R.CONSUME_MSG_TIMEOUT
    gone = admin.call(C.GET_CONSUMER_RUNNING_INFO, consumer_group="cg", client_id="nobody", jstack_enable=False)
    assert gone.code == R.SYSTEM_ERROR


def test_a_delayed_message_is_delivered_exactly_when_due(broker) -> None:
    server, reactor = broker
    client = Client(server)
    reactor.advance(0.05)  # off any 0.1 s grid: a poll would deliver late
    client.call(C.SEND_MESSAGE_V2, send_header("Later", props="DELAY\x012\x02WAIT\x01true"), b"in 2 s")
    client.call(C.SEND_MESSAGE_V2, send_header("Sooner", props="DELAY\x011\x02WAIT\x01true"), b"in 1 s")
    reactor.advance(0.999)
    assert server.store.max_offset("Sooner", 0) == 0
    reactor.advance(0.001)  # the timer moved earlier for the 1 s message parked after the 2 s one
    assert server.store.max_offset("Sooner", 0) == 1 and server.store.max_offset("Later", 0) == 0
    reactor.advance(1.0)
    assert server.store.max_offset("Later", 0) == 1
    assert len(reactor.getDelayedCalls()) == len(server.runtime.loops)  # nothing left waiting but the periodic tasks


def test_a_client_silent_past_channel_expired_timeout_is_closed_and_a_heartbeating_one_kept(broker) -> None:
    server, reactor = broker
    silent, alive = Client(server, "silent@1"), Client(server, "alive@1")
    silent.heartbeat("cg", {"T": "*"})
    alive.heartbeat("cg", {"T": "*"})
    for _ in range(4):  # 120 s: the live client heartbeats every 30 s, as the Java client does
        reactor.advance(30)
        alive.heartbeat("cg", {"T": "*"})
    assert silent.conn.connected  # 120 s exactly: not yet past the timeout
    reactor.advance(10)  # the next 10 s check finds it silent for 130 s
    assert not silent.conn.connected and silent.transport.disconnecting
    assert alive.conn.connected
