"""JSON bodies in the Java client's dialect."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codec import bodies, implementation
from codec.bodies import (
    BOOL,
    DOUBLE,
    INT,
    LONG,
    STR,
    Body,
    BrokerData,
    ClusterInfo,
    ConsumerRunningInfo,
    ConsumeStats,
    GetConsumerListByGroupResponseBody,
    GetConsumerStatusBody,
    HeartbeatData,
    Kind,
    ListOf,
    LockBatchRequestBody,
    LockBatchResponseBody,
    LongKey,
    MapOf,
    MessageQueue,
    Nested,
    OffsetWrapper,
    QueueData,
    ResetOffsetBody,
    SetOf,
    TopicRouteData,
    build_subscription,
)
from codec.errors import BodyError, CodecError
from codec.jsonjava import loads

from .strategies import int32, int64


@pytest.fixture(autouse=True)
def codec_implementation() -> str:
    """Overrides the conftest's: the JSON bodies have no compiled twin (``codec.implementation.HOT``
    names none of theirs), so a second run would only repeat the first."""
    return implementation.active()


def test_the_bodies_have_no_compiled_twin() -> None:
    """What lets this module run once: no hot name belongs to the bodies or their JSON."""
    owners = {getattr(hot.owner, "__module__", None) or hot.owner.__name__ for hot in implementation.HOT}
    assert owners and not owners & {bodies.__name__, "codec.jsonjava"}, owners

HEARTBEAT = (
    b'{"clientID":"192.0.2.2@23984#12257133659493","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET",'
    b'"consumeType":"CONSUME_PASSIVELY","groupName":"rec-cg","messageModel":"CLUSTERING","subscriptionDataSet":['
    b'{"classFilterMode":false,"codeSet":[2598919,2598920],"expressionType":"TAG","subString":"TagA || TagB",'
    b'"subVersion":1795411498782,"tagsSet":["TagA","TagB"],"topic":"RecTopic"},{"classFilterMode":false,"codeSet":[],'
    b'"expressionType":"TAG","subString":"*","subVersion":1795411498785,"tagsSet":[],"topic":"%RETRY%rec-cg"}],'
    b'"unitMode":false}],"producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"}]}'
)

# docs/protocol.md, Routes: exact Java output in the legacy (unquoted key) form.
ROUTE_LEGACY = (
    b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}],'
    b'"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,'
    b'"writeQueueNums":4}]}'
)


def test_heartbeat_from_a_java_client_parses_and_reencodes_byte_exact() -> None:
    hb = HeartbeatData.from_json(HEARTBEAT)
    (consumer,) = hb.consumer_data_set
    assert consumer.group_name == "rec-cg" and consumer.consume_type == "CONSUME_PASSIVELY"
    sub = consumer.subscription_data_set[0]
    assert (sub.topic, sub.tags_set, sub.code_set, sub.sub_version) == (
        "RecTopic", ["TagA", "TagB"], [2598919, 2598920], 1795411498782
    )
    assert hb.producer_data_set[0].group_name == "CLIENT_INNER_PRODUCER"
    assert hb.to_json() == HEARTBEAT


def test_route_data_legacy_form_has_unquoted_broker_ids() -> None:
    route = TopicRouteData.from_json(ROUTE_LEGACY)
    assert route.broker_datas[0].broker_addrs == {0: "127.0.0.1:10911"}
    assert route.to_json() == ROUTE_LEGACY
    standard = route.to_json(standard=True)
    assert json.loads(standard)["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:10911"}
    assert TopicRouteData.from_json(standard) == route


def test_standard_route_escapes_non_ascii_like_browser_compatible() -> None:
    route = TopicRouteData(queue_datas=[QueueData(broker_name="br\u00f6ker")])
    assert b'"br\\u00f6ker"' in route.to_json(standard=True)
    assert "br\u00f6ker".encode() in route.to_json()


def test_old_topic_syn_flag_spelling_is_read() -> None:
    assert QueueData.from_json(b'{"brokerName":"b","topicSynFlag":3}').topic_sys_flag == 3


def test_lock_response_set_is_written_in_java_hashset_order() -> None:
    mqs = [MessageQueue("T", "broker-a", i) for i in (3, 0, 2, 1)]
    body = LockBatchResponseBody(mqs).to_json()
    ids = [mq["queueId"] for mq in json.loads(body)["lockOKMQSet"]]
    java_hashes = sorted(mqs, key=lambda mq: ((mq.java_hash() ^ ((mq.java_hash() & 0xFFFFFFFF) >> 16)) & 15))
    assert ids == [mq.queue_id for mq in java_hashes]


def test_lock_request_tolerates_5x_only_this_broker() -> None:
    req = LockBatchRequestBody.from_json(
        b'{"clientId":"c","consumerGroup":"g","mqSet":[{"brokerName":"b","queueId":0,"topic":"T"}],"onlyThisBroker":false}'
    )
    assert req.only_this_broker is False and req.mq_set == [MessageQueue("T", "b", 0)]


def test_message_queue_keys_are_written_and_read_as_fastjson_does() -> None:
    stats = ConsumeStats({MessageQueue("T", "b", 0): OffsetWrapper(10, 8, None, 5)}, 0.0)
    text = stats.to_json()
    assert text.startswith(b'{"consumeTps":0.0,"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{')
    assert ConsumeStats.from_json(text) == stats


def test_offset_reset_and_consumer_status_bodies_read_what_java_writes() -> None:
    """RESET_CONSUMER_CLIENT_OFFSET's and GET_CONSUMER_STATUS_FROM_CLIENT's bodies as fastjson
    writes them: MessageQueue objects as map keys."""
    reset = b'{"offsetTable":{{"brokerName":"b","queueId":1,"topic":"T"}:42}}'
    assert ResetOffsetBody.from_json(reset).offset_table == {MessageQueue("T", "b", 1): 42}
    assert ResetOffsetBody.from_json(reset).to_json() == reset
    status = b'{"consumerTable":{},"messageQueueTable":{{"brokerName":"b","queueId":0,"topic":"T"}:7}}'
    assert GetConsumerStatusBody.from_json(status).message_queue_table == {MessageQueue("T", "b", 0): 7}
    assert GetConsumerStatusBody.from_json(status).to_json() == status


def test_consumer_running_info_parses_leniently() -> None:
    text = (
        b'{"jstack":"","mqTable":{{"brokerName":"b","queueId":1,"topic":"T"}:{"cachedMsgCount":2,"locked":true}},'
        b'"properties":{"PROP_CONSUMEORDERLY":"false","PROP_CONSUMER_START_TIMESTAMP":1700000000000},'
        b'"statusTable":{"T":{"pullRT":15001.5,"pullTPS":0.1,"consumeRT":1,"consumeOKTPS":0,"consumeFailedTPS":0,'
        b'"consumeFailedMsgs":0}},"subscriptionSet":[],"mqPopTable":{},"userConsumerInfo":{}}'
    )
    info = ConsumerRunningInfo.from_json(text)
    assert info.status_table["T"].pull_rt == 15001.5
    assert info.mq_table[MessageQueue("T", "b", 1)].locked
    assert info.properties["PROP_CONSUMER_START_TIMESTAMP"] == "1700000000000"


def test_cluster_info_round_trips() -> None:
    info = ClusterInfo(
        {"rmqproxy-a": BrokerData("DefaultCluster", "rmqproxy-a", {0: "127.0.0.1:9876"})},
        {"DefaultCluster": ["rmqproxy-a"]},
    )
    assert b'"brokerAddrs":{0:"127.0.0.1:9876"}' in info.to_json()
    assert ClusterInfo.from_json(info.to_json()) == info


def test_consumer_list_keeps_order() -> None:
    body = GetConsumerListByGroupResponseBody(["b", "a"])
    assert body.to_json() == b'{"consumerIdList":["b","a"]}'


@pytest.mark.parametrize(
    "text",
    [b"", b"{", b'{"consumerIdList":"x"}', b'{"consumerIdList":[{}]}', b"[1]", b'{"consumerIdList":[]}xyz', b"\xff"],
)
def test_malformed_bodies_are_body_errors(text: bytes) -> None:
    with pytest.raises(BodyError):
        GetConsumerListByGroupResponseBody.from_json(text)


def test_deep_nesting_is_a_body_error_not_a_crash() -> None:
    with pytest.raises(BodyError):
        loads(b"{1:" * 5000)
    with pytest.raises(BodyError):
        loads(b"[" * 100000)


def test_numbers_beyond_python_int_conversion_are_body_errors() -> None:
    with pytest.raises(BodyError):
        loads(b"{1:" + b"9" * 5000 + b"}")  # fastjson dialect, so the fallback parser reads it
    with pytest.raises(BodyError):
        TopicRouteData.from_json(b'{"brokerDatas":[{"brokerAddrs":{' + b"9" * 5000 + b':"x"}}]}')


@pytest.mark.parametrize(
    ("sub", "tags", "codes"),
    [
        (None, [], []),
        ("*", [], []),
        ("", [], []),
        ("TagA || TagB", ["TagA", "TagB"], [2598919, 2598920]),
        (" TagA ||  || TagA", ["TagA"], [2598919]),
    ],
)
def test_build_subscription_follows_filter_api(sub: str | None, tags: list, codes: list) -> None:
    data = build_subscription("T", sub)
    assert (data.tags_set, data.code_set) == (tags, codes)
    assert data.sub_string == (sub if tags else "*")


mq = st.builds(MessageQueue, st.text(max_size=8), st.text(max_size=8), int32)


@given(st.lists(mq, max_size=6, unique=True), st.text(max_size=10), st.text(max_size=10))
def test_lock_bodies_round_trip(mqs: list, client: str, group: str) -> None:
    body = LockBatchRequestBody(group, client, None, mqs)
    back = LockBatchRequestBody.from_json(body.to_json())
    assert back.consumer_group == group and set(back.mq_set) == set(mqs)


@given(st.dictionaries(int64, st.text(max_size=20), max_size=4), st.booleans())
def test_route_round_trips_in_both_forms(addrs: dict, standard: bool) -> None:
    route = TopicRouteData(None, [QueueData("b", 4, 4, 6, 0)], [BrokerData("c", "b", addrs)], {})
    assert TopicRouteData.from_json(route.to_json(standard=standard)) == route


def _strategy(kind: Kind) -> st.SearchStrategy:
    """Values of a declared kind (the same tables drive the codec and this generator)."""
    if kind is STR:
        return st.text(max_size=8)
    if kind is BOOL:
        return st.booleans()
    if kind is DOUBLE:
        return st.floats(allow_nan=False, allow_infinity=False, width=32)
    if isinstance(kind, LongKey) or kind is LONG:
        return int64
    if kind is INT:
        return int32
    if isinstance(kind, SetOf):
        return st.lists(_strategy(kind.item), max_size=3).map(lambda v: _unique(v))
    if isinstance(kind, ListOf):
        return st.lists(_strategy(kind.item), max_size=3)
    if isinstance(kind, MapOf):
        return st.dictionaries(_strategy(kind.key), _strategy(kind.value), max_size=3)
    if isinstance(kind, Nested):
        return _body_strategy(kind.cls)
    raise AssertionError(kind)


def _has_set(cls: type[Body], seen: tuple = ()) -> bool:
    def walk(kind: Kind) -> bool:
        if isinstance(kind, SetOf):
            return True
        if isinstance(kind, ListOf):
            return walk(kind.item)
        if isinstance(kind, MapOf):
            return walk(kind.key) or walk(kind.value)
        if isinstance(kind, Nested) and kind.cls not in seen:
            return _has_set(kind.cls, (*seen, cls))
        return False

    return any(walk(kind) for _, _, kind in cls.json_fields())


def _unique(values: list) -> list:
    try:
        return list(dict.fromkeys(values))
    except TypeError:
        return values


def _body_strategy(cls: type[Body]) -> st.SearchStrategy:
    fields = {attr: _strategy(kind) for _, attr, kind in cls.json_fields()}
    return st.builds(cls, **fields)


ALL_BODIES = [
    obj for obj in vars(bodies).values() if isinstance(obj, type) and issubclass(obj, Body) and obj is not Body
]


@pytest.mark.parametrize("cls", ALL_BODIES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("standard", [False, True], ids=["fastjson", "standard"])
def test_every_body_round_trips(cls: type[Body], standard: bool) -> None:
    @given(_body_strategy(cls))
    def check(value: Body) -> None:
        text = value.to_json(standard=standard)
        back = cls.from_json(text)
        # Sets are written in Java's iteration order, so compare what each value writes; a field
        # lost or misread on the way back would change the text.
        assert back.to_json(standard=standard) == text
        if not _has_set(cls):
            assert back == value

    check()


@given(st.binary(max_size=200))
def test_arbitrary_bytes_raise_only_codec_errors(data: bytes) -> None:
    for cls in (HeartbeatData, TopicRouteData, ConsumeStats, ConsumerRunningInfo):
        try:
            cls.from_json(data)
        except CodecError:
            pass


@given(st.text(alphabet='{}[]:,"01abT -.\\', max_size=60))
def test_json_like_text_raises_only_codec_errors(text: str) -> None:
    for cls in (HeartbeatData, ConsumeStats):
        try:
            cls.from_json(text.encode())
        except CodecError:
            pass
