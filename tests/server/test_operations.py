"""mqadmin's offset, producer and relay operations on a fake reactor: offset resets pushed to the
consumers, consumer status gathered from them, group offsets cloned, producer connections,
messages relayed to a named consumer, consume-queue views (docs/protocol.md, Offsets and relays)."""

from __future__ import annotations


from codec.bodies import (
    ConsumeMessageDirectlyResult,
    ConsumeQueueData,
    ConsumerData,
    GetConsumerStatusBody,
    HeartbeatData,
    MessageQueue,
    ProducerConnection,
    ProducerData,
    QueryConsumeQueueResponseBody,
    ResetOffsetBody,
    ResetOffsetBodyForC,
    build_subscription,
)
from codec.codes import FLAG_ONEWAY, LanguageCode
from codec.codes import RequestCode as C
from codec.codes import ResponseCode as R
from codec.command import RemotingCommand
from codec.headers import REQUEST_HEADERS, ResetOffsetRequestHeader, SendMessageResponseHeader
from codec.message import decode_messages
from rmqproxy.broker.processors import operations

from .harness import Client


def mq(topic: str, queue_id: int) -> MessageQueue:
    return MessageQueue(topic, "rmqproxy-a", queue_id)  # the default brokerName


def create_topic(client: Client, topic: str, queues: int) -> None:
    assert client.call(C.UPDATE_AND_CREATE_TOPIC, topic=topic, default_topic="TBW102", read_queue_nums=queues,
                       write_queue_nums=queues, perm=6, topic_filter_type="SINGLE_TAG", order=False).code == R.SUCCESS


def fill(server, reactor, client: Client) -> list[int]:
    """Topic T, two queues: three messages 10 s apart on queue 0, one on queue 1; their store times."""
    create_topic(client, "T", 2)
    times = []
    for queue_id in (0, 0, 0, 1):
        reactor.advance(10)
        times.append(int(reactor.seconds() * 1000))
        assert client.send_message("T", queue_id=queue_id).code == R.SUCCESS
    return times


def commit(client: Client, group: str, topic: str, queue_id: int, offset: int) -> None:
    assert client.call(C.UPDATE_CONSUMER_OFFSET, consumer_group=group, topic=topic, queue_id=queue_id,
                       commit_offset=offset).code == R.SUCCESS  # fmt: skip


def reset(admin: Client, timestamp: int, force: bool, group: str = "cg", topic: str = "T", **extra) -> RemotingCommand:
    return admin.call(C.INVOKE_BROKER_TO_RESET_OFFSET, topic=topic, group=group, timestamp=timestamp, is_force=force,
                      **extra)  # fmt: skip


def offsets(server, group: str = "cg", topic: str = "T") -> dict[int, int]:
    return {q: o for (g, t, q), o in server.store.offsets.table().items() if g == group and t == topic}


def pushed_resets(consumer: Client) -> list[RemotingCommand]:
    return [c for c in consumer.read() if c.code == C.RESET_CONSUMER_CLIENT_OFFSET]


# --- INVOKE_BROKER_TO_RESET_OFFSET ------------------------------------------------------------


def test_reset_by_time_is_pushed_to_every_online_consumer_stored_and_answered(broker) -> None:
    server, reactor = broker
    admin, first, second = Client(server, "admin"), Client(server, "c@1"), Client(server, "c@2")
    times = fill(server, reactor, admin)
    commit(admin, "cg", "T", 0, 3)
    commit(admin, "cg", "T", 1, 1)
    for consumer in (first, second):
        consumer.heartbeat("cg", {"T": "*"})
    first.read(), second.read()  # the membership notices
    answer = reset(admin, times[1], False)
    assert answer.code == R.SUCCESS
    expected = {mq("T", 0): 1, mq("T", 1): 0}  # queue 1's only message is later than the time
    assert ResetOffsetBody.from_json(answer.body).offset_table == expected
    for consumer in (first, second):
        (push,) = pushed_resets(consumer)
        assert push.flag & FLAG_ONEWAY
        header = ResetOffsetRequestHeader.from_ext(push.ext_fields)
        assert (header.topic, header.group, header.timestamp, header.is_force) == ("T", "cg", times[1], False)
        assert ResetOffsetBody.from_json(push.body).offset_table == expected
    assert offsets(server) == {0: 1, 1: 0}


def test_reset_without_force_only_moves_offsets_back(broker) -> None:
    server, reactor = broker
    admin, consumer = Client(server, "admin"), Client(server, "c@1")
    fill(server, reactor, admin)
    commit(admin, "cg", "T", 0, 0)
    commit(admin, "cg", "T", 1, 1)
    consumer.heartbeat("cg", {"T": "*"})
    to_end = reset(admin, -1, False)  # skipAccumulatedMessage -f false
    assert ResetOffsetBody.from_json(to_end.body).offset_table == {mq("T", 0): 0, mq("T", 1): 1}
    forced = reset(admin, -1, True)  # skipAccumulatedMessage
    assert ResetOffsetBody.from_json(forced.body).offset_table == {mq("T", 0): 3, mq("T", 1): 1}
    assert offsets(server) == {0: 3, 1: 1}


def test_reset_with_no_consumer_online_is_206_and_changes_nothing(broker) -> None:
    """The tools fall back to updating each queue's offset on 206 only."""
    server, reactor = broker
    admin, consumer = Client(server, "admin"), Client(server, "c@1")
    times = fill(server, reactor, admin)
    commit(admin, "cg", "T", 0, 3)
    commit(admin, "cg", "T", 1, 1)
    consumer.heartbeat("cg", {"T": "*"})
    consumer.conn.connectionLost(None)
    answer = reset(admin, times[0], True)
    assert answer.code == R.CONSUMER_NOT_ONLINE
    assert answer.remark == f"Consumer not online, so can not reset offset, Group: cg Topic: T Timestamp: {times[0]}"
    assert offsets(server) == {0: 3, 1: 1}


def test_reset_refuses_an_unknown_topic_a_group_without_offsets_and_bad_names(broker) -> None:
    server, reactor = broker
    admin = Client(server, "admin")
    fill(server, reactor, admin)
    commit(admin, "cg", "T", 0, 3)  # none on queue 1
    missing = reset(admin, -1, True, topic="Nope")
    assert (missing.code, missing.remark) == (R.SYSTEM_ERROR,
                                              "[reset-offset] reset offset failed, no topic in this broker. topic=Nope")
    partial = reset(admin, -1, True)
    assert (partial.code, partial.remark) == (R.SYSTEM_ERROR, "THe consumer group <cg> not exist")
    bad = reset(admin, -1, True, group="no/such")
    assert bad.code == R.SYSTEM_ERROR and "illegal characters" in bad.remark
    assert offsets(server) == {0: 3}


def test_a_5x_reset_of_one_queue_stores_it_and_pushes_it_even_offline(broker) -> None:
    server, reactor = broker
    admin, consumer = Client(server, "admin"), Client(server, "c@1")
    fill(server, reactor, admin)
    commit(admin, "cg", "T", 0, 3)
    answer = reset(admin, 0, False, queue_id=0, offset=1)
    assert answer.code == R.SUCCESS
    assert ResetOffsetBody.from_json(answer.body).offset_table == {mq("T", 0): 1}
    assert offsets(server) == {0: 1}
    consumer.heartbeat("cg", {"T": "*"})
    consumer.read()
    by_time = reset(admin, -1, False, queue_id=0, offset=-1)
    assert ResetOffsetBody.from_json(by_time.body).offset_table == {mq("T", 0): 3}
    (push,) = pushed_resets(consumer)
    assert ResetOffsetBody.from_json(push.body).offset_table == {mq("T", 0): 3}
    out = reset(admin, 0, False, queue_id=0, offset=9)
    assert (out.code, out.remark) == (R.SYSTEM_ERROR, "Target offset 9 not in consume queue range [0-3]")
    assert reset(admin, 0, False, queue_id=7, offset=0).code == R.SYSTEM_ERROR
    assert offsets(server) == {0: 3}


def test_a_cpp_admin_gets_the_list_form_pushed(broker) -> None:
    """mqadmin resetOffsetByTime -c sends the request as CPP: the push carries ResetOffsetBodyForC."""
    server, reactor = broker
    admin, consumer = Client(server, "admin"), Client(server, "c@1")
    fill(server, reactor, admin)
    commit(admin, "cg", "T", 0, 3)
    commit(admin, "cg", "T", 1, 1)
    consumer.heartbeat("cg", {"T": "*"})
    consumer.read()
    ext = REQUEST_HEADERS[C.INVOKE_BROKER_TO_RESET_OFFSET].encode(
        ResetOffsetRequestHeader(topic="T", group="cg", timestamp=-1, is_force=True)
    )
    request = RemotingCommand(code=C.INVOKE_BROKER_TO_RESET_OFFSET, ext_fields=ext, language=LanguageCode.CPP)
    opaque, data = admin.peer.request(request)
    admin.conn.dataReceived(data)
    assert admin.answer(opaque).code == R.SUCCESS
    (push,) = pushed_resets(consumer)
    listed = ResetOffsetBodyForC.from_json(push.body).offset_table
    assert sorted((e.topic, e.queue_id, e.offset) for e in listed) == [("T", 0, 3), ("T", 1, 1)]


def test_a_consumer_too_old_for_a_reset_is_refused(broker) -> None:
    server, reactor = broker
    admin, old = Client(server, "admin"), Client(server, "c@old", version=27)
    fill(server, reactor, admin)
    commit(admin, "cg", "T", 0, 3)
    commit(admin, "cg", "T", 1, 1)
    old.heartbeat("cg", {"T": "*"})
    old.read()
    answer = reset(admin, -1, True)
    assert (answer.code, answer.remark) == (R.SYSTEM_ERROR, "the client does not support this feature. version=27")
    assert pushed_resets(old) == [] and offsets(server) == {0: 3, 1: 1}


# --- INVOKE_BROKER_TO_GET_CONSUMER_STATUS -----------------------------------------------------


def test_consumer_status_gathers_each_clients_answer_and_leaves_out_the_silent(broker) -> None:
    server, reactor = broker
    admin, talking, silent = Client(server, "admin"), Client(server, "c@1"), Client(server, "c@2")
    for consumer in (talking, silent):
        consumer.heartbeat("cg", {"T": "*"})
    talking.read(), silent.read()  # the membership notices
    opaque = admin.send(C.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, topic="T", group="cg")
    (asked,) = [c for c in talking.read() if c.code == C.GET_CONSUMER_STATUS_FROM_CLIENT]
    assert asked.ext_fields["topic"] == "T" and asked.ext_fields["group"] == "cg"
    assert [c.code for c in silent.read()] == [C.GET_CONSUMER_STATUS_FROM_CLIENT]
    status = GetConsumerStatusBody(message_queue_table={mq("T", 0): 7, mq("T", 1): 2})
    talking.conn.dataReceived(asked.response(R.SUCCESS, body=status.to_json()).encode())
    assert admin.answer(opaque) is None  # still waiting for the silent one
    reactor.advance(operations.CONSUMER_STATUS_TIMEOUT_S)
    answer = admin.answer(opaque)
    assert answer.code == R.SUCCESS
    assert GetConsumerStatusBody.from_json(answer.body).consumer_table == {"c@1": {mq("T", 0): 7, mq("T", 1): 2}}


def test_consumer_status_of_one_named_client_and_of_an_offline_group(broker) -> None:
    server, reactor = broker
    admin, first, second = Client(server, "admin"), Client(server, "c@1"), Client(server, "c@2")
    for consumer in (first, second):
        consumer.heartbeat("cg", {"T": "*"})
    first.read(), second.read()  # the membership notices
    opaque = admin.send(C.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, topic="T", group="cg", client_addr="c@2")
    assert first.read() == []
    (asked,) = second.read()
    second.conn.dataReceived(asked.response(R.SUCCESS, body=GetConsumerStatusBody({mq("T", 0): 1}).to_json()).encode())
    assert GetConsumerStatusBody.from_json(admin.answer(opaque).body).consumer_table == {"c@2": {mq("T", 0): 1}}
    offline = admin.call(C.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, topic="T", group="nobody")
    assert (offline.code, offline.remark) == (R.SYSTEM_ERROR, "No Any Consumer online in the consumer group: [nobody]")


# --- CLONE_GROUP_OFFSET ---------------------------------------------------------------------


def test_clone_copies_one_topic_replacing_the_destinations_queues(broker) -> None:
    server, reactor = broker
    admin = Client(server, "admin")
    fill(server, reactor, admin)
    commit(admin, "src", "T", 0, 2)
    commit(admin, "dst", "T", 1, 1)  # replaced: the source has no queue 1
    assert admin.call(C.CLONE_GROUP_OFFSET, src_group="src", dest_group="dst", topic="T").code == R.SUCCESS
    assert offsets(server, "dst") == {0: 2}
    assert offsets(server, "src") == {0: 2}


def test_clone_of_every_topic_skips_those_the_online_source_does_not_subscribe_unless_offline(broker) -> None:
    server, reactor = broker
    admin, consumer = Client(server, "admin"), Client(server, "c@1")
    fill(server, reactor, admin)
    create_topic(admin, "U", 1)
    commit(admin, "src", "T", 0, 2)
    commit(admin, "src", "U", 0, 5)
    consumer.heartbeat("src", {"T": "*"})
    assert admin.call(C.CLONE_GROUP_OFFSET, src_group="src", dest_group="dst").code == R.SUCCESS
    assert (offsets(server, "dst", "T"), offsets(server, "dst", "U")) == ({0: 2}, {})
    assert admin.call(C.CLONE_GROUP_OFFSET, src_group="src", dest_group="dst", offline=True).code == R.SUCCESS
    assert offsets(server, "dst", "U") == {0: 5}
    assert admin.call(C.CLONE_GROUP_OFFSET, src_group="src", dest_group="bad/name").code == R.SYSTEM_ERROR


# --- GET_PRODUCER_CONNECTION_LIST -----------------------------------------------------------


def test_producer_connections_list_the_groups_clients_until_they_leave(broker) -> None:
    server, _reactor = broker
    producer, admin = Client(server, "p@1", version=413), Client(server, "admin")
    beat = HeartbeatData("p@1", [ProducerData("pg1")], [])
    assert producer.call(C.HEART_BEAT, body=beat.to_json()).code == R.SUCCESS
    answer = admin.call(C.GET_PRODUCER_CONNECTION_LIST, producer_group="pg1")
    assert answer.code == R.SUCCESS
    (connection,) = ProducerConnection.from_json(answer.body).connection_set
    assert (connection.client_id, connection.client_addr, connection.language, connection.version) == (
        "p@1", producer.conn.remote, "JAVA", 413)
    producer.conn.connectionLost(None)
    gone = admin.call(C.GET_PRODUCER_CONNECTION_LIST, producer_group="pg1")
    assert (gone.code, gone.remark) == (R.SYSTEM_ERROR, "the producer group[pg1] not exist")
    assert "pg1" not in server.clients.producers  # the table holds only groups with a live member


# --- CONSUME_MESSAGE_DIRECTLY ---------------------------------------------------------------


def _stored_message_id(admin: Client, reactor) -> str:
    create_topic(admin, "T", 1)
    sent = admin.send_message("T", b"the body")
    return SendMessageResponseHeader.from_ext(sent.ext_fields).msg_id


def test_consume_message_directly_relays_the_message_to_the_named_client(broker) -> None:
    server, reactor = broker
    admin, consumer = Client(server, "admin"), Client(server, "c@1")
    msg_id = _stored_message_id(admin, reactor)
    consumer.heartbeat("cg", {"T": "*"})
    consumer.read()
    opaque = admin.send(C.CONSUME_MESSAGE_DIRECTLY, consumer_group="cg", client_id="c@1", msg_id=msg_id, topic="T")
    (relayed,) = consumer.read()
    assert relayed.code == C.CONSUME_MESSAGE_DIRECTLY and not relayed.is_response
    assert relayed.ext_fields["brokerName"] == "rmqproxy-a" and relayed.ext_fields["msgId"] == msg_id
    assert relayed.ext_fields["topicSysFlag"] == "0"
    (message,) = decode_messages(relayed.body)
    assert message.body == b"the body" and message.topic == "T"
    result = ConsumeMessageDirectlyResult(consume_result="CR_SUCCESS", remark="ok", spent_time_mills=3)
    consumer.conn.dataReceived(relayed.response(R.SUCCESS, body=result.to_json()).encode())
    answer = admin.answer(opaque)
    assert answer.code == R.SUCCESS and ConsumeMessageDirectlyResult.from_json(answer.body) == result


def test_consume_message_directly_timeouts_offline_and_unknown_messages(broker) -> None:
    server, reactor = broker
    admin, consumer, old = Client(server, "admin"), Client(server, "c@1"), Client(server, "c@old", version=61)
    msg_id = _stored_message_id(admin, reactor)
    consumer.heartbeat("cg", {"T": "*"})
    old.heartbeat("cg", {"T": "*"})
    late = admin.send(C.CONSUME_MESSAGE_DIRECTLY, consumer_group="cg", client_id="c@1", msg_id=msg_id)
    reactor.advance(10)
    timed_out = admin.answer(late)
    assert timed_out.code == R.CONSUME_MSG_TIMEOUT and timed_out.remark.startswith("consumer <cg> <c@1> Timeout: ")
    offline = admin.call(C.CONSUME_MESSAGE_DIRECTLY, consumer_group="cg", client_id="c@9", msg_id=msg_id)
    assert (offline.code, offline.remark) == (R.SYSTEM_ERROR, "The Consumer <cg> <c@9> not online")
    too_old = admin.call(C.CONSUME_MESSAGE_DIRECTLY, consumer_group="cg", client_id="c@old", msg_id=msg_id)
    assert too_old.code == R.SYSTEM_ERROR and "too low to finish" in too_old.remark
    for nowhere in (msg_id[:16] + "00000000000FFFFF", msg_id[:16] + "FFFFFFFFFFFFFFFF"):  # past the end, negative
        missing = admin.call(C.CONSUME_MESSAGE_DIRECTLY, consumer_group="cg", client_id="c@1", msg_id=nowhere)
        assert (missing.code, missing.remark) == (R.SYSTEM_ERROR, f"can not find message by the offset id {nowhere}")
    garbled = admin.call(C.CONSUME_MESSAGE_DIRECTLY, consumer_group="cg", client_id="c@1", msg_id="not-an-id")
    assert garbled.code == R.SYSTEM_ERROR and "not an offset message id" in garbled.remark


def test_a_consumer_that_closes_while_asked_is_answered_at_once(broker) -> None:
    """The reference's admin waits out the 10 s and gets the timeout; the code is the same here,
    without the wait."""
    server, reactor = broker
    admin, consumer = Client(server, "admin"), Client(server, "c@1")
    msg_id = _stored_message_id(admin, reactor)
    consumer.heartbeat("cg", {"T": "*"})
    opaque = admin.send(C.CONSUME_MESSAGE_DIRECTLY, consumer_group="cg", client_id="c@1", msg_id=msg_id)
    consumer.conn.connectionLost(None)
    answer = admin.answer(opaque)
    assert answer.code == R.CONSUME_MSG_TIMEOUT and "closed before answering" in answer.remark


# --- QUERY_CONSUME_QUEUE --------------------------------------------------------------------


def query_cq(admin: Client, topic: str = "T", queue_id: int = 0, index: int = 0, count: int = 10, **extra):
    return admin.call(C.QUERY_CONSUME_QUEUE, topic=topic, queue_id=queue_id, index=index, count=count, **extra)


def test_query_consume_queue_shows_the_entries_from_an_index(broker) -> None:
    server, reactor = broker
    admin = Client(server, "admin")
    fill(server, reactor, admin)
    answer = query_cq(admin, index=1)
    assert answer.code == R.SUCCESS
    body = QueryConsumeQueueResponseBody.from_json(answer.body)
    assert (body.min_queue_index, body.max_queue_index) == (0, 3)
    assert body.subscription_data is None and body.filter_data is None
    expected = []
    for offset in (1, 2):
        phys, size, tags_code = server.store._queues[("T", 0)].entry(offset)
        expected.append(ConsumeQueueData(phys, size, tags_code))
    assert body.queue_data == expected
    assert b'"eval":false' in answer.body  # a Java primitive: always written


def test_query_consume_queue_bounds_count_and_refuses_unknown_queues(broker, monkeypatch) -> None:
    server, reactor = broker
    admin = Client(server, "admin")
    fill(server, reactor, admin)
    monkeypatch.setattr(operations, "MAX_QUERY_CQ_ENTRIES", 2)
    capped = QueryConsumeQueueResponseBody.from_json(query_cq(admin, count=2**31 - 1).body)
    assert len(capped.queue_data) == 2
    assert QueryConsumeQueueResponseBody.from_json(query_cq(admin, count=-5).body).queue_data == []
    unknown = query_cq(admin, queue_id=5)
    assert (unknown.code, unknown.remark) == (R.SYSTEM_ERROR, "5@T is not exist!")
    assert query_cq(admin, topic="no/such").code == R.SYSTEM_ERROR
    past = query_cq(admin, index=3)
    assert (past.code, past.remark) == (R.SUCCESS, "Index 3 of 0@T is not exist!")
    assert QueryConsumeQueueResponseBody.from_json(past.body).queue_data == []


def test_query_consume_queue_with_a_group_shows_its_subscription(broker) -> None:
    server, reactor = broker
    admin, consumer = Client(server, "admin"), Client(server, "c@1")
    fill(server, reactor, admin)
    offline = QueryConsumeQueueResponseBody.from_json(query_cq(admin, consumer_group="cg").body)
    assert offline.filter_data == "cg@T is not online!" and offline.subscription_data is None
    consumer.heartbeat("cg", {"T": "TagA"})
    online = QueryConsumeQueueResponseBody.from_json(query_cq(admin, consumer_group="cg").body)
    assert online.subscription_data == build_subscription("T", "TagA", 1)
    assert online.filter_data == "null"  # a tag subscription has no ConsumerFilterData
    assert len(online.queue_data) == 3


def test_a_heartbeat_with_only_a_consumer_registers_no_producer_group(broker) -> None:
    server, _reactor = broker
    consumer, admin = Client(server, "c@1"), Client(server, "admin")
    beat = HeartbeatData("c@1", [], [ConsumerData("cg", "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_FIRST_OFFSET",
                                                  [build_subscription("T", "*", 1)], False)])  # fmt: skip
    assert consumer.call(C.HEART_BEAT, body=beat.to_json()).code == R.SUCCESS
    assert admin.call(C.GET_PRODUCER_CONNECTION_LIST, producer_group="cg").code == R.SYSTEM_ERROR


def test_running_info_shares_the_relay_and_refuses_a_client_too_old_for_it(broker) -> None:
    server, _reactor = broker
    admin, old = Client(server, "admin"), Client(server, "c@old", version=61)
    old.heartbeat("cg", {"T": "*"})
    old.read()
    answer = admin.call(C.GET_CONSUMER_RUNNING_INFO, consumer_group="cg", client_id="c@old", jstack_enable=False)
    assert (answer.code, answer.remark) == (
        R.SYSTEM_ERROR, "The Consumer <c@old> Version <61> too low to finish, please upgrade it to V3_1_8_SNAPSHOT")
    assert old.read() == []
