"""The broker statistics mqadmin reads: stats items over minute/hour/day windows (315), consume
stats with a real consumeTps (208, 317) and the runtime info's rates and day totals (28), all on
the harness clock."""

from __future__ import annotations

import json
import time

import pytest

from codec.bodies import BrokerStatsData, ConsumeStats, ConsumeStatsList
from codec.codes import RequestCode as C
from codec.codes import ResponseCode as R
from codec.headers import SendMessageRequestHeader
from rmqproxy.brokerstats import java_double, next_midnight

from .harness import Client, make_server


@pytest.fixture
def broker(tmp_path):
    server, reactor = make_server(tmp_path)
    yield server, reactor
    server.stop()


def send(client: Client, topic: str, body: bytes = b"x", queue_id: int = 0, count: int = 1) -> None:
    header = SendMessageRequestHeader(
        producer_group="pg", topic=topic, default_topic="TBW102", default_topic_queue_nums=4, queue_id=queue_id,
        sys_flag=0, born_timestamp=1, flag=0, properties="WAIT\x01true",
    )  # fmt: skip
    for _ in range(count):
        assert client.call(C.SEND_MESSAGE_V2, header, body).code == R.SUCCESS


def pull(client: Client, topic: str, offset: int, group: str = "cg", queue_id: int = 0, max_msgs: int = 32):
    answer = client.answer(client.send(
        C.PULL_MESSAGE, consumer_group=group, topic=topic, queue_id=queue_id, queue_offset=offset, max_msg_nums=max_msgs,
        sys_flag=0, commit_offset=0, suspend_timeout_millis=15000, sub_version=0,
    ))  # fmt: skip
    assert answer is not None and answer.code == R.SUCCESS
    return answer


def view(client: Client, name: str, key: str) -> BrokerStatsData:
    answer = client.call(C.VIEW_BROKER_STATS_DATA, stats_name=name, stats_key=key)
    assert answer.code == R.SUCCESS, answer.remark
    return BrokerStatsData.from_json(answer.body)


def tick(reactor, seconds: float, step: float = 1.0) -> None:
    """Move the clock ``step`` at a time (a LoopingCall runs once, not once per period, over a jump)."""
    for _ in range(round(seconds / step)):
        reactor.advance(step)


def figures(data: BrokerStatsData) -> list[tuple[int, float, float]]:
    return [(i.sum, i.tps, i.avgpt) for i in (data.stats_minute, data.stats_hour, data.stats_day)]


def runtime(client: Client) -> dict[str, str]:
    return json.loads(client.call(C.GET_BROKER_RUNTIME_INFO).body)["table"]


def test_topic_puts_fill_the_minute_hour_and_day_windows_as_the_reference_samples_them(broker) -> None:
    server, reactor = broker
    client = Client(server)
    send(client, "T", b"abcd", count=6)
    assert figures(view(client, "TOPIC_PUT_NUMS", "T")) == [(0, 0.0, 0.0)] * 3  # nothing sampled yet
    reactor.advance(10)  # first minute sample: after a zero one 10 s earlier
    assert figures(view(client, "TOPIC_PUT_NUMS", "T"))[0] == (6, 0.6, 1.0)
    size = server.store.message_at("T", 0, 0).store_size
    assert view(client, "TOPIC_PUT_SIZE", "T").stats_minute.sum == 6 * size
    assert view(client, "BROKER_PUT_NUMS", server.config.cluster_name).stats_minute.sum == 6
    send(client, "T", count=3)
    reactor.advance(10)
    assert figures(view(client, "TOPIC_PUT_NUMS", "T"))[0] == (9, 9 / 20, 1.0)
    for _ in range(6):  # a minute later the window has slid past every put
        reactor.advance(10)
    assert figures(view(client, "TOPIC_PUT_NUMS", "T"))[0] == (0, 0.0, 0.0)
    reactor.advance(600 - 80)  # first hour sample, 600 s after start
    assert figures(view(client, "TOPIC_PUT_NUMS", "T"))[1] == (9, 9 / 600, 1.0)
    reactor.advance(3000)  # first day sample, an hour after start
    assert figures(view(client, "TOPIC_PUT_NUMS", "T"))[2] == (9, 9 / 3600, 1.0)


def test_unknown_stats_item_is_the_reference_error(broker) -> None:
    client = Client(broker[0])
    for name, key in (("TOPIC_PUT_NUMS", "never-sent"), ("NO_SUCH_ITEM", "T"), ("GROUP_GET_FROM_DISK_NUMS", "T@g")):
        answer = client.call(C.VIEW_BROKER_STATS_DATA, stats_name=name, stats_key=key)
        assert (answer.code, answer.remark) == (R.SYSTEM_ERROR, f"The stats <{name}> <{key}> not exist")
    missing = client.call(C.VIEW_BROKER_STATS_DATA, ext={"statsName": "TOPIC_PUT_NUMS"})
    assert missing.code == R.SYSTEM_ERROR and "statsKey" in missing.remark


def test_pulls_count_per_topic_at_group_and_make_consume_tps(broker) -> None:
    server, reactor = broker
    client = Client(server)
    client.heartbeat("cg", {"T": "*"})
    send(client, "T", b"12345", count=10)
    body_bytes = len(pull(client, "T", 0, max_msgs=4).body)
    pull(client, "T", 4)
    pull(client, "T", 0, group="other")
    reactor.advance(10)
    get = view(client, "GROUP_GET_NUMS", "T@cg")
    assert figures(get)[0] == (10, 1.0, 5.0)  # two pulls: 10 messages, 5 per pull
    assert view(client, "GROUP_GET_SIZE", "T@cg").stats_minute.sum >= body_bytes > 0
    assert view(client, "GROUP_GET_LATENCY", "T@cg").stats_minute.sum >= 0
    assert view(client, "BROKER_GET_NUMS", server.config.cluster_name).stats_minute.sum == 20
    consume = ConsumeStats.from_json(client.call(C.GET_CONSUME_STATS, consumer_group="cg", topic="T").body)
    assert consume.consume_tps == 1.0
    consume = ConsumeStats.from_json(client.call(C.GET_CONSUME_STATS, consumer_group="cg").body)
    assert consume.consume_tps == 1.0  # summed over the group's topics
    tick(reactor, 70, 10)
    assert ConsumeStats.from_json(client.call(C.GET_CONSUME_STATS, consumer_group="cg").body).consume_tps == 0.0


def test_send_back_counts_under_the_original_topic_and_group(broker) -> None:
    server, _reactor = broker
    client = Client(server)
    send(client, "T")
    phys = server.store.message_at("T", 0, 0).physical_offset
    for _ in range(2):
        assert client.call(C.CONSUMER_SEND_MSG_BACK, offset=phys, group="cg", delay_level=1,
                           max_reconsume_times=16).code == R.SUCCESS  # fmt: skip
    broker[1].advance(10)
    assert view(client, "SNDBCK_PUT_NUMS", "T@cg").stats_minute.sum == 2


def test_keys_past_max_stats_keys_count_only_in_the_broker_totals(tmp_path) -> None:
    server, reactor = make_server(tmp_path, max_stats_keys=2)
    try:
        client = Client(server)
        for topic in ("A", "B", "C"):
            send(client, topic)
        reactor.advance(10)
        assert view(client, "TOPIC_PUT_NUMS", "B").stats_minute.sum == 1
        refused = client.call(C.VIEW_BROKER_STATS_DATA, stats_name="TOPIC_PUT_NUMS", stats_key="C")
        assert refused.code == R.SYSTEM_ERROR
        assert view(client, "BROKER_PUT_NUMS", server.config.cluster_name).stats_minute.sum == 3
        assert server.broker_stats.keys == 2
    finally:
        server.stop()


def test_deleting_a_topic_drops_its_items(broker) -> None:
    server, reactor = broker
    client = Client(server)
    send(client, "T")
    pull(client, "T", 0)
    assert client.call(C.DELETE_TOPIC_IN_BROKER, topic="T").code == R.SUCCESS
    for name, key in (("TOPIC_PUT_NUMS", "T"), ("GROUP_GET_NUMS", "T@cg")):
        assert client.call(C.VIEW_BROKER_STATS_DATA, stats_name=name, stats_key=key).code == R.SYSTEM_ERROR
    assert server.broker_stats.keys == 0


def test_broker_consume_stats_lists_every_group_with_diffs_and_tps(broker) -> None:
    server, reactor = broker
    client = Client(server)
    client.heartbeat("cg", {"T": "*"})
    send(client, "T", count=5)
    send(client, "U", count=2)
    pull(client, "T", 0)
    client.call(C.UPDATE_CONSUMER_OFFSET, consumer_group="cg", topic="T", queue_id=0, commit_offset=3)
    client.call(C.UPDATE_CONSUMER_OFFSET, consumer_group="other", topic="U", queue_id=0, commit_offset=1)
    reactor.advance(10)
    answer = client.call(C.GET_BROKE_CONSUME_STATS, is_order=False)
    assert answer.code == R.SUCCESS
    body = ConsumeStatsList.from_json(answer.body)
    assert body.broker_addr == server.config.advertised_address
    by_group = {group: stats for entry in body.consume_stats_list for group, stats in entry.items()}
    assert sorted(by_group) == ["cg", "other"]
    [t_stats] = by_group["cg"]
    assert len(t_stats.offset_table) == server.topics.get("T").write_queue_nums
    assert t_stats.consume_tps == 0.5  # 5 messages pulled, over the first 10 s
    queue0 = next(w for mq, w in t_stats.offset_table.items() if mq.queue_id == 0)
    assert (queue0.broker_offset, queue0.consumer_offset, queue0.pull_offset) == (5, 3, 5)
    assert (body.total_diff, body.total_inflight_diff) == ((5 - 3) + (2 - 1), 2)
    ordered = ConsumeStatsList.from_json(client.call(C.GET_BROKE_CONSUME_STATS, is_order=True).body)
    assert [stats for entry in ordered.consume_stats_list for stats in entry.values()] == [[], []]
    assert ordered.total_diff == 0


def test_runtime_info_rates_over_10_60_600_seconds(broker) -> None:
    server, reactor = broker
    client = Client(server)
    tick(reactor, 5)
    send(client, "T", count=20)
    pull(client, "T", 0)
    tick(reactor, 6)  # 11 one-second samples: the 10 s span is there, the others not yet
    table = runtime(client)
    assert table["putTps"] == "2.0  " and table["getTransferedTps"] == "2.0  " == table["getTransferredTps"]
    assert table["getFoundTps"] == "0.1  "
    tick(reactor, 50)
    table = runtime(client)
    assert table["putTps"] == "0.0 0.3333333333333333 "  # the 20 puts were 55 s ago
    tick(reactor, 540)
    assert runtime(client)["putTps"] == "0.0 0.0 0.03333333333333333"
    assert table["runtime"] == "[ 0 days, 0 hours, 1 minutes, 1 seconds ]"
    assert table["brokerActive"] == "true" and "sendThreadPoolQueueCapacity" not in table
    assert float(table["putMessageAverageSize"]) == server.store.message_at("T", 0, 0).store_size
    assert table["dispatchBehindBytes"] == "0"  # ASYNC_FLUSH: readable as soon as written


def test_morning_totals_are_taken_at_each_local_midnight(broker) -> None:
    server, reactor = broker
    client = Client(server)
    send(client, "T", count=3)
    pull(client, "T", 0)
    table = runtime(client)
    assert [table[k] for k in ("msgPutTotalTodayMorning", "msgPutTotalYesterdayMorning", "msgPutTotalTodayNow")] == \
        ["0", "0", "3"]  # fmt: skip
    midnight = next_midnight(reactor.seconds())
    reactor.advance(midnight - reactor.seconds() + 1)
    send(client, "T", count=4)
    table = runtime(client)
    assert (table["msgPutTotalTodayMorning"], table["msgGetTotalTodayMorning"], table["msgPutTotalTodayNow"]) == \
        ("3", "3", "7")  # fmt: skip
    reactor.advance(next_midnight(reactor.seconds()) - reactor.seconds() + 1)
    table = runtime(client)
    assert (table["msgPutTotalYesterdayMorning"], table["msgPutTotalTodayMorning"]) == ("3", "7")
    assert time.localtime(midnight)[3:6] == (0, 0, 0)


@pytest.mark.parametrize(("value", "text"), [
    (0.0, "0.0"), (2.0, "2.0"), (0.3333333333333333, "0.3333333333333333"), (0.001, "0.001"),
    (0.0005, "5.0E-4"), (1.5e-5, "1.5E-5"), (12345678.0, "1.2345678E7"), (1e7, "1.0E7"), (9999999.0, "9999999.0"),
])  # fmt: skip
def test_rates_are_written_as_java_writes_a_double(value: float, text: str) -> None:
    assert java_double(value) == text


def test_statistics_are_kept_with_metrics_disabled(tmp_path) -> None:
    server, reactor = make_server(tmp_path, metrics_exporter="DISABLE")
    try:
        client = Client(server)
        send(client, "T", count=2)
        reactor.advance(10)
        assert view(client, "TOPIC_PUT_NUMS", "T").stats_minute.sum == 2
    finally:
        server.stop()
