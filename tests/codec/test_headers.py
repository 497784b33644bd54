"""Typed custom headers: every class round-trips; required fields and bad values are refused."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codec.codes import RequestCode
from codec.errors import CustomHeaderError
from codec.headers import (
    HEADER_CLASSES,
    REQUEST_HEADERS,
    RESPONSE_HEADERS,
    SEND_V2,
    HeaderCodec,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    decode_request_header,
    snake,
)
from codec.javacompat import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, java_int

from .strategies import int32, int64

_VALUES = {
    "S": st.text(st.characters(blacklist_categories=("Cs",)), max_size=12),
    "I": int32,
    "L": int64,
    "B": st.booleans(),
}


@st.composite
def header_values(draw: st.DrawFn, codec: HeaderCodec) -> object:
    values = {}
    for f in codec.fields:
        if f.required or draw(st.booleans()):
            values[f.attr] = draw(_VALUES[f.type])
    return codec.cls(**values)


ALL_CODECS = sorted(
    {id(c): c for c in [*REQUEST_HEADERS.values(), *RESPONSE_HEADERS.values()]}.values(), key=lambda c: c.java_name
)


def test_every_request_code_of_the_protocol_table_is_covered() -> None:
    without_header = {
        RequestCode.GET_BROKER_CONFIG, RequestCode.GET_BROKER_RUNTIME_INFO, RequestCode.CHECK_CLIENT_CONFIG,
        RequestCode.GET_BROKER_CLUSTER_INFO, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
        RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE,
        RequestCode.CLEAN_UNUSED_TOPIC, RequestCode.DELETE_EXPIRED_COMMITLOG,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
        RequestCode.GET_ALL_TOPIC_CONFIG, RequestCode.UPDATE_BROKER_CONFIG,
        RequestCode.GET_NAMESRV_CONFIG, RequestCode.UPDATE_NAMESRV_CONFIG, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER,
    }  # fmt: skip
    wire_codes = {c for c in RequestCode if c < 400}
    assert wire_codes - set(REQUEST_HEADERS) == without_header


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.java_name)
def test_every_header_round_trips_through_ext_fields(codec: HeaderCodec) -> None:
    @given(header_values(codec))
    def check(header: object) -> None:
        ext = codec.encode(header)
        assert all(isinstance(v, str) for v in ext.values())
        assert codec.decode(ext) == header

    check()


def test_decoded_headers_are_frozen_values_like_constructed_ones() -> None:
    """``decode`` fills the instance without ``__init__``: it must still be the same frozen value."""
    header = REQUEST_HEADERS[RequestCode.SEND_MESSAGE_V2].decode({"a": "g", "b": "T", "c": "TBW102", "d": "4",
                                                                  "e": "1", "f": "0", "g": "5", "h": "0"})
    assert header == SendMessageRequestHeader("g", "T", "TBW102", 4, 1, 0, 5, 0)
    assert hash(header) == hash(SendMessageRequestHeader("g", "T", "TBW102", 4, 1, 0, 5, 0))
    assert header.properties is None and header.unit_mode is False
    with pytest.raises(dataclasses.FrozenInstanceError):
        header.topic = "other"  # type: ignore[misc]


def test_made_headers_are_frozen_values_like_constructed_ones() -> None:
    """``CODEC.make`` fills the instance like ``decode``: the same value as ``__init__`` builds,
    defaults included, and a name the class lacks is refused."""
    made = SendMessageResponseHeader.CODEC.make(msg_id="AB", queue_id=1, queue_offset=7)
    built = SendMessageResponseHeader(msg_id="AB", queue_id=1, queue_offset=7)
    assert made == built and hash(made) == hash(built) and repr(made) == repr(built)
    assert made.to_ext() == built.to_ext() == {"msgId": "AB", "queueId": "1", "queueOffset": "7"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.msg_id = "other"  # type: ignore[misc]
    with pytest.raises(TypeError, match="queue_idd"):
        SendMessageResponseHeader.CODEC.make(msg_id="AB", queue_idd=1)


_NUMBERS = st.one_of(
    st.integers(INT64_MIN * 2, INT64_MAX * 2).map(str),
    st.text("0123456789+-\u0663\u00b2 x", max_size=21),
)


@given(_NUMBERS)
def test_number_shortcut_agrees_with_java_parsing(text: str) -> None:
    """``decode`` reads short ASCII numbers with ``int``: the same value, or the same refusal,
    as Java's rules for int and long fields."""
    codec = REQUEST_HEADERS[RequestCode.SEND_MESSAGE_V2]
    base = {"a": "g", "b": "T", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "5", "h": "0"}
    for wire, attr, lo, hi in (("e", "queue_id", INT32_MIN, INT32_MAX), ("g", "born_timestamp", INT64_MIN, INT64_MAX)):
        try:
            expected = java_int(text, lo, hi)
        except ValueError:
            expected = CustomHeaderError
        try:
            got = getattr(codec.decode({**base, wire: text}), attr)
        except CustomHeaderError:
            got = CustomHeaderError
        assert got == expected and type(got) is type(expected), (text, wire)


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.java_name)
def test_arbitrary_ext_fields_raise_only_custom_header_errors(codec: HeaderCodec) -> None:
    names = st.sampled_from([f.wire for f in codec.fields] + ["x", ""]) if codec.fields else st.text(max_size=3)

    @given(st.dictionaries(names, st.text(max_size=25), max_size=12))
    def check(ext: dict) -> None:
        try:
            codec.decode(ext)
        except CustomHeaderError:
            pass

    check()


def test_java_string_forms() -> None:
    header = SendMessageRequestHeader(
        producer_group="pg", topic="T", default_topic="TBW102", default_topic_queue_nums=4, queue_id=-1,
        sys_flag=0, born_timestamp=1700000000000, flag=0, unit_mode=True,
    )  # fmt: skip
    ext = header.to_ext()
    assert ext["queueId"] == "-1"
    assert ext["unitMode"] == "true" and ext["batch"] == "false"  # 4.9.8 primitives are always sent
    assert "properties" not in ext  # nulls are not sent


def test_send_v2_uses_one_letter_names_in_fast_order_and_decodes_to_the_v1_type() -> None:
    header = SendMessageRequestHeader(
        producer_group="pg", topic="T", default_topic="TBW102", default_topic_queue_nums=4, queue_id=1,
        sys_flag=0, born_timestamp=1, flag=0, properties="a\x01b", bname="broker-a",
    )  # fmt: skip
    ext = SEND_V2.encode(header)
    assert list(ext) == ["a", "b", "c", "d", "e", "f", "g", "h", "i", "k", "m", "n"]
    assert decode_request_header(RequestCode.SEND_MESSAGE_V2, ext) == header
    assert decode_request_header(RequestCode.SEND_BATCH_MESSAGE, ext) == header


def test_fast_headers_write_declaration_order_then_extra_keys_in_hashmap_order() -> None:
    header = SendMessageResponseHeader(msg_id="ID", queue_id=1, queue_offset=2)
    ext = header.to_ext({"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"})
    assert list(ext) == ["msgId", "queueId", "queueOffset", "TRACE_ON", "MSG_REGION"]
    pull = PullMessageResponseHeader(suggest_which_broker_id=0, next_begin_offset=5, min_offset=0, max_offset=5)
    assert list(pull.to_ext()) == ["suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset"]


def test_other_headers_are_written_in_hashmap_order() -> None:
    from codec.headers import QueryConsumerOffsetRequestHeader

    ext = QueryConsumerOffsetRequestHeader(consumer_group="G", topic="T", queue_id=3).to_ext()
    assert list(ext) == ["queueId", "topic", "consumerGroup"]  # Java 4.9.8 and 5.3.3 alike


def test_missing_required_field_is_a_custom_header_error_naming_it() -> None:
    with pytest.raises(CustomHeaderError, match=r"the custom field <queueOffset> is null"):
        PullMessageRequestHeader.from_ext({"consumerGroup": "g", "topic": "T", "queueId": "0"})


@pytest.mark.parametrize("value", ["", "abc", "1.5", " 1", "9223372036854775808"])
def test_unparsable_numbers_are_custom_header_errors(value: str) -> None:
    with pytest.raises(CustomHeaderError) as info:
        PullMessageResponseHeader.from_ext(
            {"suggestWhichBrokerId": "0", "nextBeginOffset": value, "minOffset": "0", "maxOffset": "0"}
        )
    assert not info.value.close_connection and info.value.response_code == 1


def test_unknown_keys_are_ignored_and_booleans_parse_like_java() -> None:
    ext = {"topic": "T", "acceptStandardJsonOnly": "TRUE", "ReqT": "0", "__ZONE_NAME": "z"}
    header = decode_request_header(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext)
    assert header.topic == "T" and header.accept_standard_json_only is True


def test_codes_without_a_header_decode_to_none() -> None:
    assert decode_request_header(RequestCode.GET_BROKER_CLUSTER_INFO, None) is None
    assert decode_request_header(99999, {"x": "y"}) is None


def test_attribute_names_are_snake_case() -> None:
    assert [snake(n) for n in ("queueId", "clientID", "bodyCrc32", "proxyFrowardClientId")] == [
        "queue_id", "client_id", "body_crc32", "proxy_froward_client_id"
    ]
    for cls in HEADER_CLASSES.values():
        assert [f.name for f in dataclasses.fields(cls)] == [snake(f.wire) for f in cls.CODEC.fields]
