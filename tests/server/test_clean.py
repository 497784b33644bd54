"""cleanExpiredCQ (306), cleanUnusedTopic (316), deleteExpiredCommitLog (329) on a whole server:
what each removes, what it keeps, and what a restart makes of it (docs/operations.md)."""

from __future__ import annotations

import pytest

from codec.codes import RequestCode as C
from codec.codes import ResponseCode as R

from .harness import Client, make_server, send_header

SMALL_LOG = {"commit_log_segment_size": 64 * 1024, "file_reserved_time_hours": 0.05}  # 180 s


def clean(client: Client, code: int) -> None:
    answer = client.call(code)
    assert (answer.code, answer.remark) == (R.SUCCESS, None)


@pytest.fixture
def broker(servers):
    return servers(**SMALL_LOG)


def test_clean_unused_topic_removes_deleted_topics_queues_and_offsets_only(broker, tmp_path) -> None:
    server, _ = broker
    client = Client(server)
    for topic in ("Old", "Live"):
        assert client.send_message(topic, queue_id=0).code == R.SUCCESS
        assert client.send_message(topic, queue_id=1).code == R.SUCCESS
    delayed = send_header("Live", props="DELAY\x013\x02WAIT\x01true")  # waits in SCHEDULE_TOPIC_XXXX
    assert client.call(C.SEND_MESSAGE_V2, delayed, b"x").code == R.SUCCESS
    server.store.offsets.commit("cg", "Live", 0, 1)
    server.topics.delete("Old")  # out of the table, its queues left (topics.json edited by hand, or a deleteTopic before this release)
    server.store.offsets.commit("cg", "Old", 0, 1)  # a consumer committed after that
    assert {t for t, _ in server.store.queues()} >= {"Old", "Live", "SCHEDULE_TOPIC_XXXX"}

    clean(client, C.CLEAN_UNUSED_TOPIC)

    topics = {t for t, _ in server.store.queues()}
    assert "Old" not in topics and {"Live", "SCHEDULE_TOPIC_XXXX"} <= topics
    assert not (tmp_path / "store" / "consumequeue" / "Old").exists()
    assert server.store.offsets.query("cg", "Old", 0) is None
    assert server.store.offsets.query("cg", "Live", 0) == 1
    assert server.store.max_offset("Live", 1) == 1


def test_a_topic_left_with_queues_comes_back_at_restart_unless_cleaned_and_a_deleted_one_does_not(servers, tmp_path) -> None:
    server, _ = make_server(tmp_path)
    client = Client(server)
    for topic in ("Old", "Cleaned", "Deleted"):
        assert client.send_message(topic).code == R.SUCCESS
    server.topics.delete("Old")  # out of the table, its queues left (topics.json edited by hand, or a deleteTopic before this release)
    server.topics.delete("Cleaned")
    server.store.destroy_queue("Cleaned", 0)  # what cleanUnusedTopic does
    assert client.call(C.DELETE_TOPIC_IN_BROKER, topic="Deleted").code == R.SUCCESS  # destroys its queues itself
    assert ("Deleted", 0) not in server.store.queues()
    server.stop()
    server, _ = servers(tmp_path)
    assert server.topics.get("Old") is not None  # recovered from its queues, as at every start
    assert server.topics.get("Cleaned") is None and server.topics.get("Deleted") is None


def test_delete_expired_commit_log_deletes_expired_segments_now(broker) -> None:
    server, reactor = broker
    client = Client(server)
    for _ in range(12):  # 20 KB each: four 64 KiB segments
        assert client.send_message("Big", bytes(20_000)).code == R.SUCCESS
    clean(client, C.DELETE_EXPIRED_COMMITLOG)
    assert server.store.min_physical_offset == 0  # young: kept
    reactor.advance(200)  # past the 180 s reserved time, before the 10-minute retention tick
    assert server.store.min_physical_offset == 0
    clean(client, C.DELETE_EXPIRED_COMMITLOG)
    assert server.store.min_physical_offset > 0
    low = server.store.min_offset("Big", 0)
    assert 0 < low < 12 and server.store.message_at("Big", 0, low) is not None


def test_clean_expired_cq_destroys_only_unreadable_queues_of_deleted_topics(broker, tmp_path) -> None:
    server, reactor = broker
    client = Client(server)
    for topic in ("OldExpired", "LiveExpired", "OldYoung"):
        assert client.send_message(topic, bytes(30_000)).code == R.SUCCESS
    for _ in range(3):  # the expired ones' segment is full and not the last
        assert client.send_message("Filler", bytes(30_000)).code == R.SUCCESS
    reactor.advance(200)
    assert client.send_message("OldYoung", bytes(30_000)).code == R.SUCCESS
    for topic in ("OldExpired", "OldYoung"):
        server.topics.delete(topic)  # out of the table, its queues left (topics.json edited by hand, or a deleteTopic before this release)
    clean(client, C.DELETE_EXPIRED_COMMITLOG)
    assert server.store.queue_is_empty("OldExpired", 0) and server.store.queue_is_empty("LiveExpired", 0)

    clean(client, C.CLEAN_EXPIRED_CONSUMEQUEUE)

    queues = server.store.queues()
    assert ("OldExpired", 0) not in queues
    assert ("LiveExpired", 0) in queues and server.store.max_offset("LiveExpired", 0) == 1  # offsets go on
    assert ("OldYoung", 0) in queues and server.store.message_at("OldYoung", 0, 1) is not None
    assert not (tmp_path / "store" / "consumequeue" / "OldExpired").exists()
    again = client.send_message("LiveExpired")
    assert again.code == R.SUCCESS
    assert again.ext_fields["queueOffset"] == "1"


def test_clean_commands_leave_a_fresh_broker_as_it_is(broker) -> None:
    server, _ = broker
    client = Client(server)
    assert client.send_message("T").code == R.SUCCESS
    before = server.store.queues()
    for code in (C.CLEAN_EXPIRED_CONSUMEQUEUE, C.CLEAN_UNUSED_TOPIC, C.DELETE_EXPIRED_COMMITLOG):
        clean(client, code)
    assert server.store.queues() == before and server.store.max_offset("T", 0) == 1
