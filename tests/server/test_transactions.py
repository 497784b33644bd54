"""Transactional messages on the whole server (fake reactor): a half message is invisible until
committed, a commit delivers it once, a rollback never, decisions survive a restart, and an
undecided one is checked back with a live producer of its group, then discarded after
``transactionCheckMax`` checks."""

from __future__ import annotations

from codec.bodies import HeartbeatData, ProducerData
from codec.codes import FLAG_ONEWAY
from codec.codes import RequestCode as C
from codec.codes import ResponseCode as R
from codec.headers import CheckTransactionStateRequestHeader, SendMessageResponseHeader
from codec.message import decode_message, decode_messages, decode_offset_msg_id
from rmqproxy.core.names import CHECK_MAX_TOPIC, HALF_TOPIC, OP_TOPIC

from .harness import Client, make_server
from .harness import send_header

COMMIT, ROLLBACK, UNKNOWN = 8, 12, 0


def producer(server, group: str = "pg", client_id: str = "10.0.0.5@tx#1") -> Client:
    client = Client(server, client_id)
    data = HeartbeatData(client_id, [ProducerData(group)], [])
    assert client.call(C.HEART_BEAT, body=data.to_json()).code == 0
    return client


def prepare(client: Client, topic: str, key: str, queue_id: int = 1, group: str = "pg", extra: str = "") -> dict:
    """Send a half message; returns what END_TRANSACTION needs."""
    props = f"TRAN_MSG\x01true\x02PGROUP\x01{group}\x02UNIQ_KEY\x01{key}\x02KEYS\x01{key}{extra}"
    header = send_header(topic, queue_id, props)
    born = int(client.server.reactor.seconds() * 1000)
    header = type(header)(**{**header.__dict__, "producer_group": group, "sys_flag": 4, "born_timestamp": born})
    answer = client.call(C.SEND_MESSAGE_V2, header, key.encode())
    assert answer.code == R.SUCCESS, answer.remark
    sent = SendMessageResponseHeader.from_ext(answer.ext_fields)
    return {"offset_msg_id": sent.msg_id, "queue_offset": sent.queue_offset, "queue_id": sent.queue_id,
            "transaction_id": sent.transaction_id, "key": key, "group": group}  # fmt: skip


def end(client: Client, half: dict, decision: int, *, check: bool = False, oneway: bool = True) -> int:
    """END_TRANSACTION as a Java producer sends it (one-way); returns its opaque."""
    _host, commit_log_offset = decode_offset_msg_id(half["offset_msg_id"])
    return client.send(
        C.END_TRANSACTION, flag=FLAG_ONEWAY if oneway else 0, producer_group=half["group"],
        tran_state_table_offset=half["queue_offset"], commit_log_offset=commit_log_offset,
        commit_or_rollback=decision, from_transaction_check=check, msg_id=half["key"],
        transaction_id=half.get("transaction_id"),
    )  # fmt: skip


def delivered(server, topic: str, queue_id: int = 1) -> list[str]:
    """The bodies readable in a queue of ``topic``, in queue order."""
    reader, found = Client(server, "10.0.0.9@reader#1"), []
    while True:
        answer = reader.answer(reader.pull_message(topic, len(found), queue_id=queue_id))
        if answer is None or answer.code != R.SUCCESS:
            return found
        found += [m.body.decode() for m in decode_messages(answer.body)]


def test_a_half_message_is_invisible_until_committed_and_then_delivered_once(servers, tmp_path) -> None:
    server, _reactor = servers(tmp_path)
    client = producer(server)
    assert client.call(C.SEND_MESSAGE_V2, send_header("Orders", 1, "KEYS\x01plain"), b"plain").code == 0
    half = prepare(client, "Orders", "k1")
    assert half["queue_id"] == 1 and half["transaction_id"] == "k1"  # the real queue, as the reference answers
    assert delivered(server, "Orders") == ["plain"]
    end(client, half, COMMIT)
    assert client.read() == []  # one-way: nothing is written back
    assert delivered(server, "Orders") == ["plain", "k1"]
    end(client, half, COMMIT)  # a second decision changes nothing
    end(client, half, ROLLBACK)
    assert delivered(server, "Orders") == ["plain", "k1"]
    reader = Client(server, "10.0.0.9@reader#2")
    committed = decode_messages(reader.answer(reader.pull_message("Orders", 1, queue_id=1)).body)[0]
    assert committed.sys_flag & 0xC == COMMIT
    assert "REAL_TOPIC" not in committed.properties and "TRAN_MSG" not in committed.properties
    assert committed.properties["UNIQ_KEY"] == "k1"


def test_a_rollback_is_never_delivered_and_op_records_are_written_in_batches(servers, tmp_path) -> None:
    server, reactor = servers(tmp_path)
    client = producer(server)
    halves = [prepare(client, "Orders", f"k{i}") for i in range(3)]
    end(client, halves[0], ROLLBACK)
    end(client, halves[1], COMMIT)
    end(client, halves[2], UNKNOWN)  # undecided: left for the check-back
    assert delivered(server, "Orders") == ["k1"]
    counted = {event: server.registry.get_sample_value("rmqproxy_transactions_total", {"event": event})
               for event in ("prepared", "commit", "rollback", "checked")}  # fmt: skip
    assert counted == {"prepared": 3, "commit": 1, "rollback": 1, "checked": 0}
    assert server.store.max_offset(HALF_TOPIC, 0) == 3
    assert server.store.max_offset(OP_TOPIC, 0) == 0  # not yet: decisions wait for their batch
    reactor.advance(0.1)
    [op] = [server.store.message_at(OP_TOPIC, 0, i) for i in range(server.store.max_offset(OP_TOPIC, 0))]
    assert (op.body, op.properties["TAGS"], op.properties["KEYS"]) == (b"0,1,", "d", "k0 k1")


def test_a_decision_that_does_not_match_its_half_message_is_refused_with_the_reference_remarks(servers, tmp_path) -> None:
    server, _reactor = servers(tmp_path)
    client = producer(server)
    half = prepare(client, "Orders", "k1")
    answers = {
        "group": client.answer(end(client, {**half, "group": "other"}, COMMIT, oneway=False)),
        "offset": client.answer(end(client, {**half, "queue_offset": 7}, COMMIT, oneway=False)),
        "decision": client.answer(end(client, half, 5, oneway=False)),
    }
    assert {k: (a.code, a.remark) for k, a in answers.items()} == {
        "group": (R.SYSTEM_ERROR, "The producer group wrong"),
        "offset": (R.SYSTEM_ERROR, "The transaction state table offset wrong"),
        "decision": (R.SYSTEM_ERROR, "commitOrRollback field wrong"),
    }
    assert server.rejections.counts["transaction_not_applied"] == 3  # one-way in life: counted, logged
    plain = client.call(C.SEND_MESSAGE_V2, send_header("Orders", 1, ""), b"p")
    not_half = {**half, "offset_msg_id": SendMessageResponseHeader.from_ext(plain.ext_fields).msg_id, "queue_offset": 0}
    answer = client.answer(end(client, not_half, COMMIT, oneway=False))
    assert (answer.code, answer.remark) == (R.SYSTEM_ERROR, "Find prepared transaction message failed")
    assert delivered(server, "Orders") == ["p"]


def test_clients_cannot_send_to_the_transaction_topics(servers, tmp_path) -> None:
    server, _reactor = servers(tmp_path)
    client = Client(server)
    for topic in (HALF_TOPIC, OP_TOPIC, CHECK_MAX_TOPIC, "SCHEDULE_TOPIC_XXXX"):
        answer = client.call(C.SEND_MESSAGE_V2, send_header(topic, 0, ""), b"x")
        assert (answer.code, answer.remark) == (R.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")


def test_reject_transaction_message_refuses_half_messages(servers, tmp_path) -> None:
    server, _reactor = servers(tmp_path, reject_transaction_message=True)
    client = producer(server)
    header = send_header("Orders", 1, "TRAN_MSG\x01true\x02PGROUP\x01pg")
    answer = client.call(C.SEND_MESSAGE_V2, header, b"x")
    assert answer.code == R.NO_PERMISSION and "sending transaction message is forbidden" in answer.remark
    assert server.store.max_offset(HALF_TOPIC, 0) == 0 and delivered(server, "Orders") == []


def test_an_undecided_half_message_is_checked_back_and_the_answer_commits_it(servers, tmp_path) -> None:
    server, reactor = servers(tmp_path, transaction_timeout_ms=1000, transaction_check_interval_ms=500)
    client = producer(server)
    half = prepare(client, "Orders", "k1")
    reactor.advance(0.5)  # a check pass finds it too young
    assert [c for c in client.read() if c.code == C.CHECK_TRANSACTION_STATE] == []
    reactor.advance(1.0)
    checks = [c for c in client.read() if c.code == C.CHECK_TRANSACTION_STATE]
    assert len(checks) == 1 and checks[0].is_oneway
    header = CheckTransactionStateRequestHeader.from_ext(checks[0].ext_fields)
    shown, _ = decode_message(checks[0].body)
    assert (shown.topic, shown.queue_id, shown.body) == ("Orders", 1, b"k1")
    assert header.msg_id == header.transaction_id == "k1" and header.tran_state_table_offset == 1  # the copy
    assert shown.properties["TRANSACTION_CHECK_TIMES"] == "1"
    copy = {**half, "offset_msg_id": header.offset_msg_id, "queue_offset": header.tran_state_table_offset}
    end(client, copy, COMMIT, check=True)
    assert delivered(server, "Orders") == ["k1"]
    reactor.advance(5.0)  # decided: never checked again
    assert [c for c in client.read() if c.code == C.CHECK_TRANSACTION_STATE] == []
    end(client, half, COMMIT)  # the first phase's late decision, on the older copy: still once
    assert delivered(server, "Orders") == ["k1"]


def test_after_transaction_check_max_checks_the_half_message_is_discarded(servers, tmp_path) -> None:
    server, reactor = servers(tmp_path, transaction_timeout_ms=1000, transaction_check_interval_ms=1000,
                                  transaction_check_max=2)  # fmt: skip
    client = producer(server)
    prepare(client, "Orders", "k1")
    for _ in range(6):
        reactor.advance(1.0)
    checks = [c for c in client.read() if c.code == C.CHECK_TRANSACTION_STATE]
    assert len(checks) == 2
    assert server.store.max_offset(CHECK_MAX_TOPIC, 0) == 1
    assert server.store.message_at(CHECK_MAX_TOPIC, 0, 0).properties["UNIQ_KEY"] == "k1"
    assert delivered(server, "Orders") == []


def test_without_a_live_producer_of_the_group_the_check_waits_for_one(servers, tmp_path) -> None:
    server, reactor = servers(tmp_path, transaction_timeout_ms=1000, transaction_check_interval_ms=1000)
    client = producer(server)
    prepare(client, "Orders", "k1")
    client.conn.connectionLost(None)
    reactor.advance(2.0)
    assert server.transactions.counts["unanswered"] >= 1
    again = producer(server, client_id="10.0.0.5@tx#2")
    reactor.advance(1.0)
    assert [c.code for c in again.read()].count(C.CHECK_TRANSACTION_STATE) == 1


def test_decisions_survive_a_restart_and_only_undecided_half_messages_are_checked(servers, tmp_path) -> None:
    server, reactor = make_server(tmp_path, transaction_timeout_ms=1000, transaction_check_interval_ms=1000)
    client = producer(server)
    halves = [prepare(client, "Orders", f"k{i}") for i in range(3)]
    end(client, halves[0], COMMIT)
    end(client, halves[1], ROLLBACK)
    server.stop()
    server, reactor = servers(tmp_path, transaction_timeout_ms=1000, transaction_check_interval_ms=1000)
    assert delivered(server, "Orders") == ["k0"]
    client = producer(server)
    reactor.advance(2.0)
    checks = [c for c in client.read() if c.code == C.CHECK_TRANSACTION_STATE]
    assert [decode_message(c.body)[0].body for c in checks] == [b"k2"]
    header = CheckTransactionStateRequestHeader.from_ext(checks[0].ext_fields)
    end(client, {**halves[2], "offset_msg_id": header.offset_msg_id,
                 "queue_offset": header.tran_state_table_offset}, COMMIT, check=True)  # fmt: skip
    assert delivered(server, "Orders") == ["k0", "k2"]


def test_a_commit_whose_op_record_was_lost_is_not_committed_again_when_checked_back(servers, tmp_path) -> None:
    """As after a kill -9 between a commit and its op record: the committed copy in the real
    topic is what tells the check-back the transaction is decided."""
    server, reactor = make_server(tmp_path, transaction_timeout_ms=1000, transaction_check_interval_ms=1000)
    client = producer(server)
    half = prepare(client, "Orders", "k1")
    end(client, half, COMMIT)
    server.transactions._ops.clear()  # the op record never written
    server.stop()
    server, reactor = servers(tmp_path, transaction_timeout_ms=1000, transaction_check_interval_ms=1000)
    client = producer(server)
    reactor.advance(3.0)
    assert [c for c in client.read() if c.code == C.CHECK_TRANSACTION_STATE] == []
    assert delivered(server, "Orders") == ["k1"]


def test_a_check_pass_steps_over_any_number_of_decided_half_messages_without_reading_them(servers, tmp_path) -> None:
    server, reactor = servers(tmp_path, transaction_timeout_ms=1000, transaction_check_interval_ms=1000)
    client = producer(server)
    for i in range(2500):  # more than one pass reads
        end(client, prepare(client, "Orders", f"k{i}"), COMMIT if i % 2 else ROLLBACK)
    reactor.advance(1.0)  # one pass
    assert server.store.offsets.query("CID_RMQ_SYS_TRANS", HALF_TOPIC, 0) == 2500
    assert [c for c in client.read() if c.code == C.CHECK_TRANSACTION_STATE] == []
    assert len(server.transactions._decided) == 0  # passed by the check offset: forgotten


def test_decisions_past_the_memory_bound_are_still_decided_once(servers, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("rmqproxy.broker.transaction_service.MAX_DECISIONS_IN_MEMORY", 10)
    server, reactor = servers(tmp_path)
    client = producer(server)
    halves = [prepare(client, "Orders", f"k{i}") for i in range(50)]
    for half in halves:
        end(client, half, COMMIT)
    assert len(server.transactions._decided) == 10
    reactor.advance(0.1)  # the op records are written
    end(client, halves[0], COMMIT)  # long forgotten in memory: the key index answers
    end(client, halves[1], ROLLBACK)
    assert sorted(delivered(server, "Orders")) == sorted(f"k{i}" for i in range(50))

