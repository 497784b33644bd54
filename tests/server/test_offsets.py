"""The offset path as the reference treats it (issue 23), in raw frames on a fake reactor: stored
negative offsets, tag-filter skips, consume stats and the offset corrections a consumer is given."""

from __future__ import annotations


from codec.bodies import ConsumeStats
from codec.codes import FLAG_ONEWAY, PullSysFlag
from codec.codes import RequestCode as C
from codec.codes import ResponseCode as R
from codec.headers import PullMessageResponseHeader

from .harness import Client

SUSPEND = PullSysFlag.SUSPEND
COMMIT = 0x1


def query(client: Client, group: str = "cg", topic: str = "T", queue_id: int = 0, **extra):
    return client.call(C.QUERY_CONSUMER_OFFSET, consumer_group=group, topic=topic, queue_id=queue_id, **extra)


def commit(client: Client, offset: int, group: str = "cg", topic: str = "T", queue_id: int = 0):
    return client.call(C.UPDATE_CONSUMER_OFFSET, consumer_group=group, topic=topic, queue_id=queue_id,
                       commit_offset=offset)  # fmt: skip


def offsets(answer) -> tuple[int, int, int, int]:
    """(code, nextBeginOffset, minOffset, maxOffset) of a pull answer."""
    h = PullMessageResponseHeader.from_ext(answer.ext_fields)
    return answer.code, h.next_begin_offset, h.min_offset, h.max_offset


def stats(client: Client, group: str = "cg", topic: str | None = None) -> dict[tuple[str, int], tuple]:
    """GET_CONSUME_STATS as {(topic, queue): (brokerOffset, consumerOffset, pullOffset)}."""
    answer = client.call(C.GET_CONSUME_STATS, consumer_group=group, topic=topic)
    assert answer.code == R.SUCCESS
    table = ConsumeStats.from_json(answer.body).offset_table
    return {(mq.topic, mq.queue_id): (w.broker_offset, w.consumer_offset, w.pull_offset) for mq, w in table.items()}


# -- 1. a stored negative offset is no offset ---------------------------------------------------------


def test_a_stored_negative_offset_is_answered_as_no_offset(broker) -> None:
    client = Client(broker[0])
    for _ in range(5):
        client.send_message("T")
    assert commit(client, -1).code == R.SUCCESS  # stored as sent, as the reference stores it
    answer = query(client)
    # the queue starts at 0 with its first message in memory: 0, not -1 (which a LAST_OFFSET
    # consumer takes as "none" and jumps to the end, skipping all five)
    assert (answer.code, answer.ext_fields["offset"]) == (R.SUCCESS, "0")
    assert query(client, set_zero_if_not_found=False).code == R.QUERY_NOT_FOUND
    assert commit(client, 3).code == R.SUCCESS
    assert query(client).ext_fields["offset"] == "3"


def test_no_offset_with_the_first_message_out_of_memory_is_query_not_found(servers, tmp_path) -> None:
    server, _reactor = servers(tmp_path, access_message_in_memory_max_ratio=0)
    client = Client(server)
    client.send_message("T")
    client.send_message("T")
    commit(client, -1)
    answer = query(client)
    assert (answer.code, answer.remark) == (
        R.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"
    )  # fmt: skip
    # a queue with nothing in it yet still answers 0: there is no first message to miss
    assert (query(client, queue_id=1).code, query(client, queue_id=1).ext_fields["offset"]) == (R.SUCCESS, "0")


def test_a_negative_commit_through_the_pull_flag_also_reads_as_none(broker) -> None:
    client = Client(broker[0])
    client.heartbeat("cg", {"T": "*"})
    client.send_message("T")
    client.answer(client.pull_message("T", 0, sys_flag=COMMIT, commit_offset=-1))
    assert query(client).ext_fields["offset"] == "0"
    assert stats(client)[("T", 0)] == (1, 0, 1)


def test_offsets_of_a_topic_the_broker_does_not_have_are_refused(broker) -> None:
    client = Client(broker[0])
    answer = commit(client, 5, topic="NoSuchTopic")
    assert (answer.code, answer.remark) == (R.TOPIC_NOT_EXIST, "Topic NoSuchTopic not exist!")
    assert ("cg", "NoSuchTopic", 0) not in broker[0].store.offsets.table()


def test_a_commit_past_the_end_is_kept_and_the_pull_corrects_it(broker) -> None:
    client = Client(broker[0])
    client.heartbeat("cg", {"T": "*"})
    for _ in range(3):
        client.send_message("T")
    client.send(C.UPDATE_CONSUMER_OFFSET, flag=FLAG_ONEWAY, consumer_group="cg", topic="T", queue_id=0,
                commit_offset=10)  # fmt: skip
    assert query(client).ext_fields["offset"] == "10"  # kept as sent, as the reference keeps it
    # the consumer's pull from there is told where the queue ends (OFFSET_OVERFLOW_BADLY)
    assert offsets(client.answer(client.pull_message("T", 10))) == (R.PULL_OFFSET_MOVED, 3, 0, 3)


def test_retry_topics_answer_like_any_other_queue(broker) -> None:
    client = Client(broker[0])
    client.heartbeat("cg", {"T": "*"})  # creates %RETRY%cg, 1 queue
    answer = query(client, topic="%RETRY%cg")
    assert (answer.code, answer.ext_fields["offset"]) == (R.SUCCESS, "0")
    commit(client, -1, topic="%RETRY%cg")
    assert query(client, topic="%RETRY%cg").ext_fields["offset"] == "0"


# -- 2. a tag-filter skip is answered at once -----------------------------------------------------


def test_a_scan_that_skipped_only_other_tags_is_answered_at_once_not_held(broker) -> None:
    server, _reactor = broker
    client = Client(server)
    client.heartbeat("cg", {"T": "TagA"})
    for _ in range(87):
        client.send_message("T", tags="TagB")
    answer = client.answer(client.pull_message("T", 0, sys_flag=SUSPEND))
    assert answer is not None, "held: the committed offset would stay at 0 for a whole suspend"
    assert (answer.code, answer.remark) == (R.PULL_RETRY_IMMEDIATELY, "NO_MATCHED_MESSAGE")
    assert offsets(answer) == (R.PULL_RETRY_IMMEDIATELY, 87, 0, 87)
    assert server.holds.count == 0
    # the client's next pull, from the end and committing it, is the one that is held
    opaque = client.pull_message("T", 87, sys_flag=SUSPEND | COMMIT, commit_offset=87)
    assert client.answer(opaque) is None and server.holds.count == 1
    assert query(client).ext_fields["offset"] == "87"
    assert stats(client)[("T", 0)] == (87, 87, 87)  # no lag, nothing in flight


def test_a_scan_cut_by_its_limit_answers_where_it_stopped(broker) -> None:
    client = Client(broker[0])
    client.heartbeat("cg", {"T": "TagA"})
    for _ in range(801):
        client.send_message("T", tags="TagB")
    answer = client.answer(client.pull_message("T", 0, sys_flag=SUSPEND))
    assert offsets(answer) == (R.PULL_RETRY_IMMEDIATELY, 800, 0, 801)  # 16000 index bytes: 800 entries
    answer = client.answer(client.pull_message("T", 800, sys_flag=SUSPEND))
    assert offsets(answer) == (R.PULL_RETRY_IMMEDIATELY, 801, 0, 801)


def test_a_held_pull_whose_deadline_finds_only_other_tags_answers_their_end(broker) -> None:
    server, reactor = broker
    client = Client(server)
    client.heartbeat("cg", {"T": "TagA"})
    client.send_message("T", tags="TagA")
    opaque = client.pull_message("T", 1, sys_flag=SUSPEND, suspend_timeout_millis=15000)
    client.send_message("T", tags="TagB")  # does not wake it
    assert client.answer(opaque) is None
    reactor.advance(15)
    assert offsets(client.answer(opaque)) == (R.PULL_RETRY_IMMEDIATELY, 2, 0, 2)


# -- 3. consume stats and broker config as Java writes them ------------------------------------------


def test_consume_stats_clamp_negative_offsets_and_report_the_pulled_offset(broker) -> None:
    client = Client(broker[0])
    client.heartbeat("cg", {"T": "*"})
    for queue_id in (0, 0, 0, 1):
        client.send_message("T", queue_id=queue_id)
    commit(client, -1, queue_id=0)
    commit(client, -1, queue_id=1)
    client.answer(client.pull_message("T", 0, queue_id=0, max_msg_nums=2))  # two of three handed out
    table = stats(client, topic="T")
    assert table[("T", 0)] == (3, 0, 2)  # consumerOffset 0 (not -1), pullOffset 2: in flight 2
    assert table[("T", 1)] == (1, 0, 0)
    assert set(table) == {("T", q) for q in range(4)}  # every read queue of the topic
    commit(client, 2, queue_id=0)
    assert stats(client, topic="T")[("T", 0)] == (3, 2, 2)


def test_consume_stats_leave_out_topics_outside_the_groups_subscriptions(broker) -> None:
    client = Client(broker[0])
    client.heartbeat("cg", {"T": "*"})
    client.send_message("T")
    client.send_message("Other")
    commit(client, 1, topic="T")
    commit(client, 1, topic="Other")  # an old offset; the group no longer subscribes to Other
    assert {t for t, _ in stats(client)} == {"T"}


def test_lag_and_in_flight_metrics_count_a_negative_commit_as_none(broker) -> None:
    server, _reactor = broker
    client = Client(server)
    client.heartbeat("cg", {"T": "*"})
    for _ in range(3):
        client.send_message("T")
    commit(client, -1)
    client.answer(client.pull_message("T", 0, max_msg_nums=1))
    assert ("T", "cg", 3, 1) in server.store.consumer_lag()


def test_broker_config_writes_values_as_java_does(broker) -> None:
    answer = Client(broker[0]).call(C.GET_BROKER_CONFIG)
    lines = set(answer.body.decode().splitlines())
    assert {"autoCreateTopicEnable=true", "longPollingEnable=true", "fileReservedTime=72"} <= lines
    assert not any(value in ("True", "False") for value in (ln.partition("=")[2] for ln in lines))


# -- the offset corrections a consumer is given --------------------------------------------------------


def test_below_the_min_offset_after_old_files_went_the_pull_moves_to_the_min(servers, tmp_path) -> None:
    server, reactor = servers(tmp_path, commit_log_segment_size=64 * 1024, file_reserved_time_hours=1.0)
    client = Client(server)
    client.heartbeat("cg", {"T": "*"})
    for _ in range(8):  # 20 KB records: three to a 64 KiB segment
        client.send_message("T", bytes(20_000))
    reactor.advance(2 * 3600)  # retention runs every 10 min: the full segments are gone
    client = Client(server)  # the first one was closed as silent meanwhile
    client.heartbeat("cg", {"T": "*"})
    client.send_message("T", b"fresh")
    low = server.store.min_offset("T", 0)
    assert low > 0
    answer = client.answer(client.pull_message("T", 0, sys_flag=SUSPEND))
    assert (answer.remark, offsets(answer)) == ("OFFSET_TOO_SMALL", (R.PULL_OFFSET_MOVED, low, low, 9))
    assert query(client).code == R.QUERY_NOT_FOUND  # no offset, and the queue no longer starts at 0
    assert query(client, group="old").code == R.QUERY_NOT_FOUND


def test_every_pull_answer_suggests_the_master(broker) -> None:
    client = Client(broker[0])
    client.heartbeat("cg", {"T": "*"})
    client.send_message("T")
    for offset in (0, 1, 5):
        assert client.answer(client.pull_message("T", offset)).ext_fields["suggestWhichBrokerId"] == "0"
