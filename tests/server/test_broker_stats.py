"""The broker statistics mqadmin reads: stats items over minute/hour/day windows (315), consume
stats with a real consumeTps (208, 317) and the runtime info (28): every key a 4.9.7 broker
sends, its rates, put times and day totals, all on the harness clock."""

from __future__ import annotations

import json
import re
import time

import pytest

from codec.bodies import BrokerStatsData, ConsumeStats, ConsumeStatsList
from codec.codes import RequestCode as C
from codec.codes import ResponseCode as R
from rmqproxy.broker.brokerstats import java_double, next_midnight

from .harness import Client, send_header


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
    assert [client.send_message("T", b"abcd").code for _ in range(6)] == [R.SUCCESS] * 6
    assert figures(view(client, "TOPIC_PUT_NUMS", "T")) == [(0, 0.0, 0.0)] * 3  # nothing sampled yet
    reactor.advance(10)  # first minute sample: after a zero one 10 s earlier
    assert figures(view(client, "TOPIC_PUT_NUMS", "T"))[0] == (6, 0.6, 1.0)
    size = server.store.message_at("T", 0, 0).store_size
    assert view(client, "TOPIC_PUT_SIZE", "T").stats_minute.sum == 6 * size
    assert view(client, "BROKER_PUT_NUMS", server.config.cluster_name).stats_minute.sum == 6
    assert [client.send_message("T").code for _ in range(3)] == [R.SUCCESS] * 3
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
    assert [client.send_message("T", b"12345").code for _ in range(10)] == [R.SUCCESS] * 10
    first = client.answer(client.pull_message("T", 0, max_msg_nums=4), required=True)
    assert first.code == R.SUCCESS
    body_bytes = len(first.body)
    assert client.answer(client.pull_message("T", 4), required=True).code == R.SUCCESS
    assert client.answer(client.pull_message("T", 0, group="other"), required=True).code == R.SUCCESS
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
    assert client.send_message("T").code == R.SUCCESS
    phys = server.store.message_at("T", 0, 0).physical_offset
    for _ in range(2):
        assert client.call(C.CONSUMER_SEND_MSG_BACK, offset=phys, group="cg", delay_level=1,
                           max_reconsume_times=16).code == R.SUCCESS  # fmt: skip
    broker[1].advance(10)
    assert view(client, "SNDBCK_PUT_NUMS", "T@cg").stats_minute.sum == 2


def test_keys_past_max_stats_keys_count_only_in_the_broker_totals(servers, tmp_path) -> None:
    server, reactor = servers(tmp_path, max_stats_keys=2)
    client = Client(server)
    for topic in ("A", "B", "C"):
        assert client.send_message(topic).code == R.SUCCESS
    reactor.advance(10)
    assert view(client, "TOPIC_PUT_NUMS", "B").stats_minute.sum == 1
    refused = client.call(C.VIEW_BROKER_STATS_DATA, stats_name="TOPIC_PUT_NUMS", stats_key="C")
    assert refused.code == R.SYSTEM_ERROR
    assert view(client, "BROKER_PUT_NUMS", server.config.cluster_name).stats_minute.sum == 3
    assert server.broker_stats.keys == 2


def test_deleting_a_topic_drops_its_items(broker) -> None:
    server, reactor = broker
    client = Client(server)
    assert client.send_message("T").code == R.SUCCESS
    assert client.answer(client.pull_message("T", 0), required=True).code == R.SUCCESS
    assert client.call(C.DELETE_TOPIC_IN_BROKER, topic="T").code == R.SUCCESS
    for name, key in (("TOPIC_PUT_NUMS", "T"), ("GROUP_GET_NUMS", "T@cg")):
        assert client.call(C.VIEW_BROKER_STATS_DATA, stats_name=name, stats_key=key).code == R.SYSTEM_ERROR
    assert server.broker_stats.keys == 0


def test_broker_consume_stats_lists_every_group_with_diffs_and_tps(broker) -> None:
    server, reactor = broker
    client = Client(server)
    client.heartbeat("cg", {"T": "*"})
    assert [client.send_message("T").code for _ in range(5)] == [R.SUCCESS] * 5
    assert [client.send_message("U").code for _ in range(2)] == [R.SUCCESS] * 2
    assert client.answer(client.pull_message("T", 0), required=True).code == R.SUCCESS
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
    assert [client.send_message("T").code for _ in range(20)] == [R.SUCCESS] * 20
    assert client.answer(client.pull_message("T", 0), required=True).code == R.SUCCESS
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
    assert table["brokerActive"] == "true"
    assert float(table["putMessageAverageSize"]) == server.store.message_at("T", 0, 0).store_size
    assert table["dispatchBehindBytes"] == "0"  # ASYNC_FLUSH: readable as soon as written


#: The keys of a 4.9.7 broker's runtime info (``StoreStatsService.getRuntimeInfo``,
#: ``DefaultMessageStore.getRuntimeInfo``, ``AdminBrokerProcessor.prepareRuntimeInfo``), less the
#: keys named after a commit-log path or a delay level (``KEYED``).
REFERENCE_KEYS = {
    "bootTimestamp", "runtime", "putMessageEntireTimeMax", "putMessageTimesTotal", "putMessageFailedTimes",
    "putMessageSizeTotal", "putMessageDistributeTime", "putMessageAverageSize", "dispatchMaxBuffer",
    "getMessageEntireTimeMax", "putTps", "getFoundTps", "getMissTps", "getTotalTps", "getTransferedTps",
    "putLatency99", "putLatency999",
    "commitLogDiskRatio", "consumeQueueDiskRatio", "commitLogMinOffset", "commitLogMaxOffset",
    "brokerVersionDesc", "brokerVersion", "msgPutTotalYesterdayMorning", "msgPutTotalTodayMorning",
    "msgPutTotalTodayNow", "msgGetTotalYesterdayMorning", "msgGetTotalTodayMorning", "msgGetTotalTodayNow",
    "sendThreadPoolQueueSize", "sendThreadPoolQueueCapacity", "pullThreadPoolQueueSize", "pullThreadPoolQueueCapacity",
    "queryThreadPoolQueueSize", "queryThreadPoolQueueCapacity", "EndTransactionQueueSize",
    "EndTransactionThreadPoolQueueCapacity", "dispatchBehindBytes", "pageCacheLockTimeMills",
    "sendThreadPoolQueueHeadWaitTimeMills", "pullThreadPoolQueueHeadWaitTimeMills",
    "queryThreadPoolQueueHeadWaitTimeMills", "earliestMessageTimeStamp", "startAcceptSendRequestTimeStamp",
    "remainTransientStoreBufferNumbs", "remainHowManyDataToFlush", "commitLogDirCapacity",
}  # fmt: skip
KEYED = (re.compile(r"commitLogDiskRatio_.+"), re.compile(r"scheduleMessageOffset_\d+"))
HUMAN_BYTES = r"(\d+ B|\d+\.\d [KMGTPE]iB)"
DISTRIBUTION = re.compile(
    r"\[<=0ms\]:\d+ \[0~10ms\]:\d+ \[10~50ms\]:\d+ \[50~100ms\]:\d+ \[100~200ms\]:\d+ \[200~500ms\]:\d+ "
    r"\[500ms~1s\]:\d+ \[1~2s\]:\d+ \[2~3s\]:\d+ \[3~4s\]:\d+ \[4~5s\]:\d+ \[5~10s\]:\d+ \[10s~\]:\d+ "
)


def test_runtime_info_has_every_key_of_a_4_9_7_broker(broker) -> None:
    server, reactor = broker
    client = Client(server)
    assert [client.send_message("T").code for _ in range(3)] == [R.SUCCESS] * 3
    later = send_header("Later", props="DELAY\x011\x02WAIT\x01true")  # delay level 1: 1 s
    assert client.call(C.SEND_MESSAGE_V2, later, b"x").code == R.SUCCESS
    tick(reactor, 2)
    table = runtime(client)
    assert REFERENCE_KEYS <= set(table), sorted(REFERENCE_KEYS - set(table))
    keyed = {key: [k for k in table if pattern.fullmatch(k)] for pattern in KEYED for key in [pattern.pattern]}
    assert all(keyed.values()), keyed
    assert table[f"commitLogDiskRatio_{server.store.commitlog_dir}"] == table["commitLogDiskRatio"]
    assert table["scheduleMessageOffset_1"] == "1,1"  # one parked, one delivered
    assert table["rmqproxyVersion"] and table["getTransferredTps"] == table["getTransferedTps"]  # kept for 5.x tools
    for key in ("commitLogDiskRatio", "consumeQueueDiskRatio"):
        assert 0.0 <= float(table[key]) <= 1.0 and re.fullmatch(r"\d\.\d{1,2}", table[key])
    assert re.fullmatch(rf"Total : {HUMAN_BYTES}, Free : {HUMAN_BYTES}\.", table["commitLogDirCapacity"])
    assert re.fullmatch(HUMAN_BYTES, table["remainHowManyDataToFlush"])
    assert table["putMessageTimesTotal"] == "5" and table["putMessageFailedTimes"] == "0"  # 4 sent, 1 delivered
    assert table["putMessageSizeTotal"] == str(server.store.max_physical_offset - server.store.min_physical_offset)
    assert table["earliestMessageTimeStamp"] == str(server.store.message_at("T", 0, 0).store_timestamp)
    capacity = str(server.config.max_in_flight_requests_per_connection)
    for pool in ("send", "pull", "query"):
        assert (table[f"{pool}ThreadPoolQueueSize"], table[f"{pool}ThreadPoolQueueCapacity"],
                table[f"{pool}ThreadPoolQueueHeadWaitTimeMills"]) == ("0", capacity, "0")  # fmt: skip
    assert (table["EndTransactionQueueSize"], table["EndTransactionThreadPoolQueueCapacity"]) == ("0", capacity)
    assert (table["remainTransientStoreBufferNumbs"], table["startAcceptSendRequestTimeStamp"]) == ("2147483647", "0")
    # the console's per-minute collector: the first of getTotalTps' three rates, as a double
    assert float(table["getTotalTps"].split(" ")[0]) == 0.0 and table["putTps"] == "  "  # no 10 s span yet


def test_runtime_tps_move_with_puts_and_pulls_found_and_missed(broker) -> None:
    server, reactor = broker
    client = Client(server)
    tick(reactor, 5)
    assert [client.send_message("T").code for _ in range(20)] == [R.SUCCESS] * 20
    assert client.answer(client.pull_message("T", 0), required=True).code == R.SUCCESS  # found: 20 messages
    for offset, code in ((20, R.PULL_NOT_FOUND), (25, R.PULL_OFFSET_MOVED)):  # past the end: found none
        assert client.answer(client.pull_message("T", offset), required=True).code == code
    tick(reactor, 6)  # 11 one-second samples: the 10 s span is there, the others not yet
    table = runtime(client)
    assert (table["putTps"], table["getFoundTps"], table["getMissTps"], table["getTransferedTps"]) == \
        ("2.0  ", "0.1  ", "0.2  ", "2.0  ")  # fmt: skip
    assert table["getTotalTps"] == "0.30000000000000004 0.0 0.0"  # Java's 0.1 + 0.2; 0.0 for unsampled spans
    assert float(table["getTotalTps"].split(" ")[0]) == 0.1 + 0.2
    assert table["getMessageEntireTimeMax"] == "0"  # the harness clock does not move within a pull
    tick(reactor, 50)
    assert runtime(client)["getTotalTps"] == "0.0 0.05 0.0"  # the 3 pulls were 55 s ago
    tick(reactor, 540)
    table = runtime(client)
    assert table["getMissTps"] == "0.0 0.0 0.003333333333333333"
    assert table["getTotalTps"] == "0.0 0.0 0.004999999999999999"  # 1/600 + 2/600 as Java adds them


def test_runtime_put_times_describe_the_last_minute(servers, tmp_path) -> None:
    server, reactor = servers(tmp_path, flush_disk_type="SYNC_FLUSH")
    client = Client(server)
    table = runtime(client)
    assert (table["putMessageDistributeTime"], table["putLatency99"], table["putLatency999"],
            table["putMessageEntireTimeMax"]) == ("null", "0.00", "0.00", "0")  # the reference before a minute
    for wait_s in (0.0, 0.0255, 0.0255):  # a SYNC_FLUSH put ends when its fsync is back on the reactor
        opaque = client.send(C.SEND_MESSAGE_V2, send_header("T", props="WAIT\x01true"), b"x")
        reactor.advance(wait_s)
        while client.answer(opaque) is None:
            assert reactor.run_thread_calls(timeout=5) > 0
    assert runtime(client)["putMessageEntireTimeMax"] == "25"
    assert runtime(client)["putMessageDistributeTime"] == "null"  # the minute is not over
    tick(reactor, 60)
    table = runtime(client)
    assert DISTRIBUTION.fullmatch(table["putMessageDistributeTime"])
    assert table["putMessageDistributeTime"].startswith("[<=0ms]:1 [0~10ms]:0 [10~50ms]:2 [50~100ms]:0 ")
    # p99 of 3 puts is their index 2: the first of the 2 in bucket (24, 26], interpolated as the reference does
    assert (table["putLatency99"], table["putLatency999"]) == ("25.00", "25.00")
    tick(reactor, 60)  # a minute without puts
    table = runtime(client)
    assert table["putMessageDistributeTime"].startswith("[<=0ms]:0 [0~10ms]:0 [10~50ms]:0 ")
    assert (table["putLatency99"], table["putMessageEntireTimeMax"]) == ("0.00", "25")  # the longest stays


def test_morning_totals_are_taken_at_each_local_midnight(broker) -> None:
    server, reactor = broker
    client = Client(server)
    assert [client.send_message("T").code for _ in range(3)] == [R.SUCCESS] * 3
    assert client.answer(client.pull_message("T", 0), required=True).code == R.SUCCESS
    table = runtime(client)
    assert [table[k] for k in ("msgPutTotalTodayMorning", "msgPutTotalYesterdayMorning", "msgPutTotalTodayNow")] == \
        ["0", "0", "3"]  # fmt: skip
    midnight = next_midnight(reactor.seconds())
    reactor.advance(midnight - reactor.seconds() + 1)
    assert [client.send_message("T").code for _ in range(4)] == [R.SUCCESS] * 4
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


def test_statistics_are_kept_with_metrics_disabled(servers, tmp_path) -> None:
    server, reactor = servers(tmp_path, metrics_exporter="DISABLE")
    client = Client(server)
    assert [client.send_message("T").code for _ in range(2)] == [R.SUCCESS] * 2
    reactor.advance(10)
    assert view(client, "TOPIC_PUT_NUMS", "T").stats_minute.sum == 2
