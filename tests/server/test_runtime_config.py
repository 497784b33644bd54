"""Configuration changed while the server runs (fake reactor): UPDATE_BROKER_CONFIG (25) and
UPDATE_NAMESRV_CONFIG (318) change each runtime key live and persist it; GET_NAMESRV_CONFIG
(319), GET_ALL_TOPIC_CONFIG (21) and the name server's KV config (100/101/102/219) with
``orderTopicConf`` in routes."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import pytest

from codec.bodies import (
    CheckClientRequestBody,
    KVTable,
    SubscriptionData,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
)
from codec.codes import PullSysFlag, RequestCode as C
from codec.codes import ResponseCode as R
from codec.command import RemotingCommand
from codec.headers import GetKVConfigResponseHeader
from rmqproxy.core.config import SETTINGS, load, parse_properties
from rmqproxy.broker.kv import MAX_NAME_LENGTH, ORDER_TOPIC_CONFIG
from rmqproxy.broker.server import Server

from .harness import Client, FakeReactor
from .harness import send_header
from .test_reply import REPLY_TOPIC, answer_push, reply_header, requester

_names = itertools.count()


def update(client: Client, text: str, code: int = C.UPDATE_BROKER_CONFIG):
    return client.call(code, body=text.encode())


def broker_config(client: Client) -> dict[str, str]:
    return parse_properties(client.call(C.GET_BROKER_CONFIG).body.decode())


def route(client: Client, topic: str):
    return client.call(C.GET_ROUTEINFO_BY_TOPIC, topic=topic)


# --- one probe per runtime key: what a client (or, for a copied value, the part) sees -------


def _new_topic_send(server, reactor) -> int:
    return Client(server).send_message(f"Fresh{next(_names)}").code


def _send_to_existing_topic(server, reactor) -> int:
    server.topics.ensure("Existing", 1)
    return Client(server).send_message("Existing").code


def _new_group(server, reactor) -> tuple[int, int]:
    """A new group's retry-topic route, and its first pull."""
    client, group = Client(server), f"g{next(_names)}"
    server.topics.ensure("T", 1)
    answer = client.answer(client.pull_message("T", 0, group=group))
    return route(client, f"%RETRY%{group}").code, answer.code


def _template_queues(server, reactor) -> int:
    return TopicRouteData.from_json(route(Client(server), "TBW102").body).queue_datas[0].write_queue_nums


def _create_8_queues(server, reactor) -> int:
    return Client(server).call(C.UPDATE_AND_CREATE_TOPIC, topic=f"Made{next(_names)}", default_topic="TBW102",
                               read_queue_nums=8, write_queue_nums=8, perm=6, topic_filter_type="SINGLE_TAG",
                               order=False).code  # fmt: skip


def _answered_within(seconds: float, **pull_fields: Any) -> Callable[[Any, Any], bool]:
    def probe(server, reactor) -> bool:
        client = Client(server)
        topic = f"Empty{next(_names)}"
        server.topics.ensure(topic, 1)
        opaque = client.pull_message(topic, 0, sys_flag=PullSysFlag.SUSPEND, **pull_fields)
        reactor.advance(seconds)
        return client.answer(opaque) is not None

    return probe


def _held_pull_answer(server, reactor) -> int | None:
    client = Client(server)
    topic = f"Empty{next(_names)}"
    server.topics.ensure(topic, 1)
    answer = client.answer(client.pull_message(topic, 0, sys_flag=PullSysFlag.SUSPEND))
    return None if answer is None else answer.code


def _second_request_on_one_connection(server, reactor) -> int:
    """One connection, made before the change: a held pull, then a cluster-info request."""
    client = server.__dict__.setdefault("probe_client", Client(server))
    topic = f"Empty{next(_names)}"
    server.topics.ensure(topic, 1)
    client.pull_message(topic, 0, sys_flag=PullSysFlag.SUSPEND)
    return client.call(C.GET_BROKER_CLUSTER_INFO).code


def _big_send(server, reactor) -> int:
    return Client(server).send_message("Big", body=b"x" * 2000).code


def _half_frame_open_after_6s(server, reactor) -> bool:
    """A connection that sent half a frame and nothing more, 6 s on."""
    client = Client(server)
    client.conn.dataReceived(RemotingCommand(code=C.GET_BROKER_CLUSTER_INFO, opaque=1, body=bytes(100)).encode()[:50])
    reactor.advance(6)
    return client.conn.connected


def _silent_client_open_after_30s(server, reactor) -> bool:
    client = Client(server, f"silent@{next(_names)}")
    client.heartbeat("cg", {"T": "*"})
    reactor.advance(30)
    return client.conn.connected


def _sql92_check(server, reactor) -> int:
    sub = SubscriptionData("T", "a > 1", [], [], 1, "SQL92", False)
    return Client(server).call(C.CHECK_CLIENT_CONFIG, body=CheckClientRequestBody("c@1", "cg", sub).to_json()).code


def _timer_send(delay_s: int) -> Callable[[Any, Any], int]:
    def probe(server, reactor) -> int:
        props = f"TIMER_DELAY_SEC\x01{delay_s}\x02WAIT\x01true"
        return Client(server).call(C.SEND_MESSAGE_V2, send_header("Timed", 0, props), b"x").code

    return probe


def _reply_stored(server, reactor) -> bool:
    req = requester(server, f"10.0.0.5@req{next(_names)}#1")
    before = server.store.max_offset(REPLY_TOPIC, 0)
    responder = Client(server, "10.0.0.6@responder#1")
    opaque = responder.send(C.SEND_REPLY_MESSAGE_V2, reply_header(req.client_id), b"the answer")
    answer_push(req)
    assert responder.answer(opaque).code == R.SUCCESS
    return server.store.max_offset(REPLY_TOPIC, 0) > before


def _half_send(server, reactor) -> int:
    header = send_header("Tx", 0, f"TRAN_MSG\x01true\x02PGROUP\x01pg\x02UNIQ_KEY\x01k{next(_names)}")
    header = type(header)(**{**header.__dict__, "sys_flag": 4})
    return Client(server).call(C.SEND_MESSAGE_V2, header, b"x").code


def _order_conf_in_route(server, reactor) -> str | None:
    client = Client(server)
    assert client.call(C.PUT_KV_CONFIG, namespace=ORDER_TOPIC_CONFIG, key="Ordered", value="rmqproxy-a:8").code == 0
    client.send_message("Ordered")
    return TopicRouteData.from_json(route(client, "Ordered").body).order_topic_conf


def _kv_put(server, reactor) -> int:
    return Client(server).call(C.PUT_KV_CONFIG, namespace="ns", key=f"k{next(_names)}", value="v").code


def _runs_within(seconds: float, task: Callable[[Any], Any]) -> Callable[[Any, Any], bool]:
    """Whether a periodic task runs in the next ``seconds`` (counted through its loop)."""

    def probe(server, reactor) -> bool:
        loop = server.runtime.loops[task(server)]
        runs = []
        original, loop.f = loop.f, lambda: runs.append(1)
        try:
            reactor.advance(seconds)
        finally:
            loop.f = original
        return bool(runs)

    return probe


def _attr(get: Callable[[Any], Any]) -> Callable[[Any, Any], Any]:
    """A value a part copied at start, seen in that part (no client sees it in one request)."""
    return lambda server, reactor: get(server)


#: key -> (value to set, settings set first or "", probe, what the probe sees after the change)
PROBES: dict[str, tuple[str, str, Callable[[Any, Any], Any], Any]] = {
    "autoCreateTopicEnable": ("false", "", _new_topic_send, R.TOPIC_NOT_EXIST),
    "autoCreateSubscriptionGroup": ("false", "", _new_group, (R.TOPIC_NOT_EXIST, R.SUBSCRIPTION_GROUP_NOT_EXIST)),
    "defaultTopicQueueNums": ("2", "", _template_queues, 2),
    "maxTopicQueueNums": ("4", "", _create_8_queues, R.SYSTEM_ERROR),
    "longPollingEnable": ("false", "", _answered_within(1.0), True),
    "shortPollingTimeMills": ("200", "longPollingEnable=false", _answered_within(0.2), True),
    "maxPullSuspendTimeMillis": ("500", "", _answered_within(0.5), True),
    "maxHeldPulls": ("0", "", _held_pull_answer, R.PULL_NOT_FOUND),
    "maxHeldPullsPerConnection": ("0", "", _held_pull_answer, R.SYSTEM_BUSY),
    "maxInFlightRequestsPerConnection": ("1", "", _second_request_on_one_connection, R.SYSTEM_BUSY),
    "maxBufferedReplyBytesPerConnection": ("4096", "", _attr(lambda s: s.reply_buffers.per_connection), 4096),
    "maxBufferedReplyBytes": ("65536", "", _attr(lambda s: s.reply_buffers.limit), 65536),
    "maxUnfinishedFrameBytes": ("33554432", "", _attr(lambda s: s.runtime.unfinished_frames.limit), 32 << 20),
    "frameStallTimeoutMillis": ("5000", "", _half_frame_open_after_6s, False),
    "maxInvisibleMessages": ("3", "", _attr(lambda s: s.pops.max_in_flight), 3),
    "lockReleaseOnDisconnect": ("immediate", "", _attr(lambda s: s.locks.release_on_disconnect), "immediate"),
    "rebalanceLockMaxLiveTime": ("5000", "", _attr(lambda s: s.locks.max_live_s), 5.0),
    "maxMessageSize": ("1024", "", _big_send, R.MESSAGE_ILLEGAL),
    "fileReservedTime": ("1", "", _attr(lambda s: s.store.config.file_reserved_time_hours), 1.0),
    "diskMaxUsedSpaceRatio": ("90", "", _attr(lambda s: s.store.config.disk_max_used_space_ratio), 90),
    "channelExpiredTimeout": ("20000", "", _silent_client_open_after_30s, False),
    "enablePropertyFilter": ("false", "", _sql92_check, R.SYSTEM_ERROR),
    "timerWheelEnable": ("false", "", _timer_send(5), R.SYSTEM_ERROR),
    "timerMaxDelaySec": ("10", "", _timer_send(60), R.MESSAGE_ILLEGAL),
    "storeReplyMessageEnable": ("false", "", _reply_stored, False),
    "rejectTransactionMessage": ("true", "", _half_send, R.NO_PERMISSION),
    "brokerPermission": ("4", "", _send_to_existing_topic, R.NO_PERMISSION),
    "transactionTimeOut": ("1000", "", _attr(lambda s: s.transactions.settings.timeout_ms), 1000),
    "transactionCheckInterval": ("2000", "", _runs_within(3.0, lambda s: s.transactions.check), True),
    "clientStatsIntervalSeconds": ("5", "", _runs_within(6.0, lambda s: s.client_stats.poll), True),
    "transactionCheckMax": ("3", "", _attr(lambda s: s.transactions.settings.check_max), 3),
    "orderMessageEnable": ("true", "", _order_conf_in_route, "rmqproxy-a:8"),
    "kvConfigMaxEntries": ("0", "", _kv_put, R.SYSTEM_ERROR),
}


def test_every_runtime_key_has_a_probe() -> None:
    assert sorted(PROBES) == sorted(s.key for s in SETTINGS if s.runtime)


@pytest.mark.parametrize("key", sorted(PROBES))
def test_each_runtime_key_takes_effect_live(servers, tmp_path, key: str) -> None:
    value, setup, probe, expected = PROBES[key]
    server, reactor = servers(tmp_path, message_delay_level="1s 2s 3s")
    admin = Client(server)
    if setup:
        assert update(admin, setup).code == R.SUCCESS
    before = probe(server, reactor)
    answer = update(admin, f"{key}={value}")
    assert (answer.code, answer.remark) == (R.SUCCESS, None)
    after = probe(server, reactor)
    assert after == expected and before != after, (before, after)
    assert broker_config(admin)[key] == value


def _start(conf, reactor: FakeReactor | None = None) -> tuple[Server, FakeReactor]:
    reactor = reactor or FakeReactor()
    server = Server(load(conf), reactor, wall=reactor.wall)
    server.start()
    return server, reactor


def test_changes_are_written_to_the_conf_file_and_survive_a_restart(tmp_path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(f"# mine\nstorePathRootDir={tmp_path / 'store'}\nlistenPort=9876\nmetricsPromExporterPort=0\ngrpcServerPort=0\n"
                    "sendMessageThreadPoolNums=4\nmessageDelayLevel=1s 2s\n")  # fmt: skip
    server, _ = _start(conf)
    try:
        admin = Client(server)
        assert admin.send_message("Kept", body=b"x" * 3000).code == R.SUCCESS
        body = "maxMessageSize=2048\nautoCreateTopicEnable=false\nfileReservedTime=12\norderMessageEnable=true\n"
        assert update(admin, body).code == R.SUCCESS
    finally:
        server.stop()
    written = parse_properties(conf.read_text())
    assert written["maxMessageSize"] == "2048" and written["sendMessageThreadPoolNums"] == "4"
    assert written["messageDelayLevel"] == "1s 2s" and "# mine" not in conf.read_text()
    assert (tmp_path / "broker.conf.bak").read_text().startswith("# mine")
    assert "brokerConfigPath" not in written and "namesrvAddr" not in written
    server, _ = _start(conf)
    try:
        admin = Client(server)
        seen = broker_config(admin)
        assert (seen["maxMessageSize"], seen["autoCreateTopicEnable"], seen["fileReservedTime"]) == ("2048", "false", "12")
        assert admin.send_message("AfterRestart").code == R.TOPIC_NOT_EXIST  # TBW102 built without INHERIT
        assert admin.send_message("Kept", body=b"x" * 3000).code == R.MESSAGE_ILLEGAL
        assert server.config.order_message_enable and server.config.extra == {"sendMessageThreadPoolNums": "4"}
    finally:
        server.stop()


def test_every_runtime_key_survives_a_restart_in_force(tmp_path) -> None:
    """All runtime keys changed in one request; after a restart on the same file each has its new
    value, and the parts that copy one at start hold it."""
    conf = tmp_path / "broker.conf"
    conf.write_text(f"storePathRootDir={tmp_path / 'store'}\nmetricsPromExporterPort=0\n")
    changes = {key: value for key, (value, _setup, _probe, _expected) in PROBES.items()}
    server, _ = _start(conf)
    try:
        assert update(Client(server), "".join(f"{k}={v}\n" for k, v in changes.items())).code == R.SUCCESS
    finally:
        server.stop()
    server, _ = _start(conf)
    try:
        seen = broker_config(Client(server))
        assert {key: seen[key] for key in changes} == changes
        assert (server.holds.max_held, server.locks.max_live_s, server.store.config.max_message_size) == (0, 5.0, 1024)
        assert server.topics.get("TBW102").write_queue_nums == 2 and server.reply_buffers.limit == 65536
    finally:
        server.stop()


def test_without_a_conf_file_changes_go_to_the_stores_broker_properties(servers, tmp_path) -> None:
    server, _ = servers(tmp_path)
    assert update(Client(server), "maxHeldPulls=7").code == R.SUCCESS
    server.stop()
    written = tmp_path / "store" / "config" / "broker.properties"
    assert parse_properties(written.read_text())["maxHeldPulls"] == "7"
    assert load(written).max_held_pulls == 7


@pytest.mark.parametrize(("body", "code", "remark"), [
    ("noSuchKey=1", R.NO_PERMISSION, "Can not update config: noSuchKey is not a broker key of rmqproxy"),
    ("listenPort=10911", R.NO_PERMISSION, "Can not update config in black list: listenPort does not take effect"),
    ("brokerConfigPath=/tmp/x", R.NO_PERMISSION, "Can not update config in black list: brokerConfigPath"),
    ("brokerPermission=8", R.SYSTEM_ERROR, "config not changed: brokerPermission must be 0 to 7"),
    ("namesrvAddr=a:1", R.NO_PERMISSION, "Can not update config: namesrvAddr is not a broker key"),
    ("maxMessageSize=big", R.SYSTEM_ERROR, "maxMessageSize='big' is not a valid int"),
    ("longPollingEnable=yes", R.SYSTEM_ERROR, "longPollingEnable='yes' is not true or false"),
    ("maxMessageSize=0", R.SYSTEM_ERROR, "config not changed: maxMessageSize must be 1 or more, not 0"),
    ("diskMaxUsedSpaceRatio=101", R.SYSTEM_ERROR, "config not changed: diskMaxUsedSpaceRatio must be a percentage"),
    ("lockReleaseOnDisconnect=later", R.SYSTEM_ERROR, "config not changed: lockReleaseOnDisconnect must be safe or"),
    ("fileReservedTime=nan", R.SYSTEM_ERROR, "fileReservedTime='nan' is not a finite number"),
    ("maxHeldPulls=5\nlistenPort=1", R.NO_PERMISSION, "Can not update config in black list: listenPort"),
])  # fmt: skip
def test_refusals_change_nothing(servers, tmp_path, body: str, code: int, remark: str) -> None:
    server, _ = servers(tmp_path)
    admin = Client(server)
    before = broker_config(admin)
    answer = update(admin, body)
    assert answer.code == code and answer.remark.startswith(remark), answer.remark
    assert broker_config(admin) == before and server.holds.max_held == 100_000
    assert not (tmp_path / "store" / "config" / "broker.properties").exists()


def test_a_body_that_is_not_utf8_or_empty(servers, tmp_path) -> None:
    server, _ = servers(tmp_path)
    admin = Client(server)
    assert admin.call(C.UPDATE_BROKER_CONFIG, body=b"maxHeldPulls=\xff").code == R.SYSTEM_ERROR
    assert admin.call(C.UPDATE_BROKER_CONFIG).code == R.SUCCESS  # nothing to change, as the reference
    assert not (tmp_path / "store" / "config" / "broker.properties").exists()


def test_a_config_file_that_cannot_be_written_refuses_the_change(servers, tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    server, _ = servers(tmp_path, broker_config_path=str(blocker / "broker.conf"))
    admin = Client(server)
    answer = update(admin, "maxHeldPulls=5")
    assert answer.code == R.SYSTEM_ERROR and "cannot write" in answer.remark
    assert server.holds.max_held == 100_000 and broker_config(admin)["maxHeldPulls"] == "100000"


def test_the_conf_file_keeps_its_permissions(tmp_path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(f"storePathRootDir={tmp_path / 'store'}\nmetricsPromExporterPort=0\ntls.server.keyPassword=secret\n")
    conf.chmod(0o600)
    server, _ = _start(conf)
    try:
        assert update(Client(server), "maxHeldPulls=9").code == R.SUCCESS
    finally:
        server.stop()
    assert conf.stat().st_mode & 0o777 == 0o600 and load(conf).max_held_pulls == 9


def test_values_are_escaped_so_the_file_reads_back_the_same(tmp_path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(f"storePathRootDir={tmp_path / 'store'}\nmetricsPromExporterPort=0\nodd\\ key=  a\\\\b\\nc\n")
    server, _ = _start(conf)
    try:
        assert update(Client(server), "maxHeldPulls=9").code == R.SUCCESS
    finally:
        server.stop()
    assert load(conf).extra == {"odd key": "a\\b\nc"}


# --- name server: its config, KV config and orderTopicConf ---------------------------------


def test_namesrv_config_shows_its_keys_and_updates_only_its_runtime_ones(servers, tmp_path) -> None:
    server, _ = servers(tmp_path)
    admin = Client(server)
    shown = parse_properties(admin.call(C.GET_NAMESRV_CONFIG).body.decode())
    assert shown["listenPort"] == "9876" and shown["orderMessageEnable"] == "false"
    assert shown["kvConfigPath"] == str(tmp_path / "store" / "config" / "kvConfig.json")
    assert "maxMessageSize" not in shown
    assert update(admin, "orderMessageEnable=true", C.UPDATE_NAMESRV_CONFIG).code == R.SUCCESS
    assert parse_properties(admin.call(C.GET_NAMESRV_CONFIG).body.decode())["orderMessageEnable"] == "true"
    refused = update(admin, "maxMessageSize=10", C.UPDATE_NAMESRV_CONFIG)
    assert refused.code == R.NO_PERMISSION and "is not a name-server key" in refused.remark
    refused = update(admin, "listenPort=1", C.UPDATE_NAMESRV_CONFIG)
    assert refused.code == R.NO_PERMISSION and "black list" in refused.remark


def test_kv_config_put_get_list_delete_and_persist(servers, tmp_path) -> None:
    server, _ = servers(tmp_path)
    client = Client(server)
    missing = client.call(C.GET_KV_CONFIG, namespace="ns", key="k")
    assert (missing.code, missing.remark) == (R.QUERY_NOT_FOUND, "No config item, Namespace: ns Key: k")
    assert client.call(C.PUT_KV_CONFIG, namespace="ns", key="k", value="v1").code == R.SUCCESS
    assert client.call(C.PUT_KV_CONFIG, namespace="ns", key="k", value="v2").code == R.SUCCESS
    assert client.call(C.PUT_KV_CONFIG, namespace="ns", key="j", value="").code == R.SUCCESS
    got = client.call(C.GET_KV_CONFIG, namespace="ns", key="k")
    assert got.code == R.SUCCESS and GetKVConfigResponseHeader.from_ext(got.ext_fields).value == "v2"
    assert KVTable.from_json(client.call(C.GET_KVLIST_BY_NAMESPACE, namespace="ns").body).table == {"k": "v2", "j": ""}
    assert client.call(C.GET_KVLIST_BY_NAMESPACE, namespace="none").code == R.QUERY_NOT_FOUND
    assert client.call(C.DELETE_KV_CONFIG, namespace="ns", key="j").code == R.SUCCESS
    assert client.call(C.DELETE_KV_CONFIG, namespace="ns", key="never").code == R.SUCCESS
    server.stop()
    stored = json.loads((tmp_path / "store" / "config" / "kvConfig.json").read_text())
    assert stored == {"configTable": {"ns": {"k": "v2"}}}
    server, _ = servers(tmp_path)
    got = Client(server).call(C.GET_KV_CONFIG, namespace="ns", key="k")
    assert GetKVConfigResponseHeader.from_ext(got.ext_fields).value == "v2"


def test_kv_config_is_bounded(servers, tmp_path) -> None:
    server, _ = servers(tmp_path, kv_config_max_entries=2)
    client = Client(server)
    for key in ("a", "b"):
        assert client.call(C.PUT_KV_CONFIG, namespace="ns", key=key, value="v").code == R.SUCCESS
    full = client.call(C.PUT_KV_CONFIG, namespace="other", key="c", value="v")
    assert full.code == R.SYSTEM_ERROR and "kvConfigMaxEntries=2" in full.remark
    assert client.call(C.PUT_KV_CONFIG, namespace="ns", key="a", value="new").code == R.SUCCESS  # a replace
    long_key = client.call(C.PUT_KV_CONFIG, namespace="ns", key="k" * (MAX_NAME_LENGTH + 1), value="v")
    assert long_key.code == R.SYSTEM_ERROR and "key must be 1 to 255" in long_key.remark
    big = client.call(C.PUT_KV_CONFIG, namespace="ns", key="a", value="v" * 20_000)
    assert big.code == R.SYSTEM_ERROR and "value must be at most" in big.remark
    assert client.call(C.PUT_KV_CONFIG, ext={"namespace": "ns", "key": "a"}).code == R.SYSTEM_ERROR  # no value
    assert server.kv.table == {"ns": {"a": "new", "b": "v"}}


def test_routes_carry_order_topic_conf_only_while_order_message_enable_is_on(servers, tmp_path) -> None:
    server, _ = servers(tmp_path, order_message_enable=True)
    client = Client(server)
    client.send_message("Ordered")
    assert TopicRouteData.from_json(route(client, "Ordered").body).order_topic_conf is None
    value = "rmqproxy-a:8;other-b:4"
    assert client.call(C.PUT_KV_CONFIG, namespace=ORDER_TOPIC_CONFIG, key="Ordered", value=value).code == 0
    answer = route(client, "Ordered")
    assert TopicRouteData.from_json(answer.body).order_topic_conf == value
    assert b'"orderTopicConf":"rmqproxy-a:8;other-b:4"' in answer.body
    assert update(client, "orderMessageEnable=false").code == R.SUCCESS
    assert TopicRouteData.from_json(route(client, "Ordered").body).order_topic_conf is None


def test_all_topic_config_lists_every_topic_with_a_version_that_moves(servers, tmp_path) -> None:
    server, _ = servers(tmp_path)
    client = Client(server)
    first = TopicConfigSerializeWrapper.from_json(client.call(C.GET_ALL_TOPIC_CONFIG).body)
    assert "TBW102" in first.topic_config_table and "Made" not in first.topic_config_table
    assert client.call(C.UPDATE_AND_CREATE_TOPIC, topic="Made", default_topic="TBW102", read_queue_nums=3,
                       write_queue_nums=3, perm=6, topic_filter_type="SINGLE_TAG", order=True).code == 0  # fmt: skip
    answer = client.call(C.GET_ALL_TOPIC_CONFIG)
    second = TopicConfigSerializeWrapper.from_json(answer.body)
    made = second.topic_config_table["Made"]
    assert (made.topic_name, made.read_queue_nums, made.write_queue_nums, made.perm, made.order) == ("Made", 3, 3, 6, True)
    assert second.data_version.counter > first.data_version.counter
    assert json.loads(answer.body)["dataVersion"]["counter"] == second.data_version.counter


def test_system_topic_list_from_broker_names_what_export_metadata_leaves_out(servers, tmp_path) -> None:
    server, _ = servers(tmp_path)
    client = Client(server)
    client.send_message("UserTopic")
    server.topics.ensure("rmq_sys_wheel", 1)
    answer = client.call(C.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
    names = set(TopicList.from_json(answer.body).topic_list)
    assert {"TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "rmq_sys_wheel"} <= names
    assert "UserTopic" not in names and "DefaultCluster" not in names
