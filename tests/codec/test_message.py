"""Stored records, batch bodies, properties, message ids, tag hashes and compression."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codec import message as codec_message  # its hot names: codec.implementation rebinds them
from codec.errors import CodecError, MessageError
from codec.message import (
    MAGIC_V2,
    BatchItem,
    HostPort,
    Message,
    body_crc,
    crc32,
    create_offset_msg_id,
    decode_batch,
    decode_batch_with_construct,
    decode_message,
    decode_message_with_construct,
    decode_messages,
    decode_offset_msg_id,
    decompress_body,
    encode_batch,
    tag_hash,
)

from .golden import MESSAGE_C
from .strategies import batch_items, messages


def test_golden_record_decodes_to_the_documented_values() -> None:
    msg, end = decode_message(MESSAGE_C, check_crc=True)
    assert end == len(MESSAGE_C) == msg.store_size == 192
    assert (msg.topic, msg.queue_id, msg.queue_offset, msg.physical_offset) == ("TopicTest", 3, 42, 8192)
    assert (msg.born_timestamp, msg.born_host) == (1700000000000, HostPort("127.0.0.1", 54321))
    assert (msg.store_timestamp, msg.store_host) == (1700000000005, HostPort("127.0.0.1", 10911))
    assert msg.body == b"Hello" and msg.body_crc == 2010220930
    assert msg.properties == {
        "KEYS": "order-1",
        "TAGS": "TagA",
        "UNIQ_KEY": "7F00000130391B6D35860A1B2C3D0001",
        "CLUSTER": "DefaultCluster",
    }
    assert msg.msg_id == "7F00000130391B6D35860A1B2C3D0001"
    assert msg.offset_msg_id == "7F00000100002A9F0000000000002000"
    assert tag_hash(msg.tags) == 2598919


def test_golden_record_reencodes_byte_exact() -> None:
    msg, _ = decode_message(MESSAGE_C)
    assert codec_message.encode_message(msg) == MESSAGE_C


def test_ipv6_hosts_set_the_v6_sysflags_and_widen_the_record() -> None:
    msg = Message("T", b"x", born_host=HostPort("::1", 1), store_host=HostPort("fe80::2", 2), sys_flag=0x1)
    record = codec_message.encode_message(msg)
    back, _ = decode_message(record)
    assert back.sys_flag == 0x1 | 0x10 | 0x20
    assert len(record) == 91 + 24 + 1 + 1
    assert back.offset_msg_id == create_offset_msg_id(HostPort("fe80::2", 2), 0) and len(back.offset_msg_id) == 56


def test_v2_records_carry_a_two_byte_topic_length() -> None:
    topic = "T" * 200
    record = codec_message.encode_message(Message(topic, b"b", magic=MAGIC_V2))
    assert decode_message(record)[0].topic == topic
    with pytest.raises(MessageError):
        codec_message.encode_message(Message(topic, b"b"))  # v1 allows 127 bytes


def test_many_records_decode_from_one_pull_body() -> None:
    body = b"".join(codec_message.encode_message(Message("T", bytes([i]) * i, queue_offset=i)) for i in range(32))
    assert [m.queue_offset for m in decode_messages(body)] == list(range(32))


def test_a_truncated_pull_body_is_an_error_naming_the_offset() -> None:
    body = MESSAGE_C + MESSAGE_C[:-1]
    with pytest.raises(MessageError) as info:
        decode_messages(body)
    assert info.value.where == 192


@given(st.binary(max_size=4096), st.integers(0, 2**32 - 1))
def test_crc32_is_zlibs_crc32(data: bytes, seed: int) -> None:
    """BODYCRC and the key index hash go through zlib-ng's crc32: it must be zlib's (Java's) CRC-32."""
    assert crc32(data, seed) == zlib.crc32(data, seed)
    assert crc32(memoryview(data)) == zlib.crc32(data)


def test_crc_mismatch_is_detected_when_asked() -> None:
    broken = bytearray(MESSAGE_C)
    broken[0x58] ^= 0xFF  # a body byte
    decode_message(bytes(broken))
    with pytest.raises(MessageError):
        decode_message(bytes(broken), check_crc=True)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a\x01b\x02c\x01d", {"a": "b", "c": "d"}),
        ("a\x01b\x02", {"a": "b"}),  # Java < 4.9.1 and Go append a separator
        ("a\x01b\x02a\x01c", {"a": "c"}),  # a later duplicate wins
        ("\x01x\x02k\x01\x02abc\x02k2\x01v\x01w", {"k2": "v\x01w"}),  # malformed pairs skipped
        ("", {}),
    ],
)
def test_properties_parse_as_java_does(text: str, expected: dict) -> None:
    assert codec_message.string_to_properties(text) == expected


def _java_string2messageProperties(text: str) -> dict:
    """A literal transcription of the Java 4.9.8 loop, to check the regex against."""
    result = {}
    index = 0
    while index < len(text):
        new_index = text.find("\x02", index)
        if new_index < 0:
            new_index = len(text)
        if new_index - index >= 3:
            kv = text.find("\x01", index)
            if index < kv < new_index - 1:
                result[text[index:kv]] = text[kv + 1 : new_index]
        index = new_index + 1
    return result


@given(st.text(st.sampled_from("ab\x01\x02"), max_size=16))
def test_property_parser_agrees_with_the_java_loop(text: str) -> None:
    assert codec_message.string_to_properties(text) == _java_string2messageProperties(text)


@given(messages())
def test_every_message_round_trips(msg: Message) -> None:
    record = codec_message.encode_message(msg)
    back, end = decode_message(record, check_crc=True)
    assert end == len(record)
    derived = ("body_crc", "store_size", "sys_flag")
    expected = {f: getattr(msg, f) for f in Message.__dataclass_fields__ if f not in derived}
    assert {f: getattr(back, f) for f in expected} == expected
    assert back.body_crc == body_crc(msg.body) and back.store_size == len(record)


@given(messages())
def test_fast_path_agrees_with_the_construct_declaration(msg: Message) -> None:
    record = codec_message.encode_message(msg)
    assert decode_message_with_construct(record) == decode_message(record)[0]


@given(st.lists(batch_items, max_size=5))
def test_every_batch_round_trips(items: list[BatchItem]) -> None:
    body = encode_batch(items)
    assert decode_batch(body) == items
    assert decode_batch_with_construct(body) == items


def test_batch_items_keep_their_own_properties() -> None:
    items = [BatchItem(b"a", {"KEYS": "k0", "TAGS": "TagA"}), BatchItem(b"bb", {"KEYS": "k1"}, flag=3)]
    body = encode_batch(items)
    assert struct.unpack_from(">iiiii", body) == (20 + 1 + 2 + len("KEYS\x01k0\x02TAGS\x01TagA"), 0, 0, 0, 1)
    assert decode_batch(body) == items


@given(st.binary(max_size=400))
def test_arbitrary_bytes_raise_only_codec_errors(data: bytes) -> None:
    for decode in (decode_messages, decode_batch, decode_message_with_construct, decode_batch_with_construct):
        try:
            decode(data)
        except CodecError:
            pass


@given(messages(), st.data())
def test_mutated_records_raise_only_codec_errors(msg: Message, data: st.DataObject) -> None:
    record = bytearray(codec_message.encode_message(msg))
    for _ in range(3):
        record[data.draw(st.integers(0, len(record) - 1))] = data.draw(st.integers(0, 255))
    try:
        decode_messages(bytes(record), check_crc=True)
    except CodecError:
        pass


def test_offset_msg_id_round_trips_for_both_address_families() -> None:
    for host in (HostPort("10.1.2.3", 10911), HostPort("2001:db8::7", 10911)):
        assert decode_offset_msg_id(create_offset_msg_id(host, 123456789)) == (host, 123456789)


@pytest.mark.parametrize("bad", ["", "XYZ", "7F000001" * 5, "G" * 32])
def test_bad_msg_ids_are_message_errors(bad: str) -> None:
    with pytest.raises(MessageError):
        decode_offset_msg_id(bad)


def test_tag_hash_of_untagged_is_zero() -> None:
    assert tag_hash(None) == tag_hash("") == 0


def test_zlib_bodies_inflate_by_sysflag() -> None:
    plain = b"x" * 5000
    assert decompress_body(zlib.compress(plain, 5), 0x301) == plain
    assert decompress_body(zlib.compress(plain), 0x1) == plain  # old producers: type bits 0
    assert decompress_body(plain, 0) == plain
    with pytest.raises(MessageError):
        decompress_body(b"not zlib", 0x301)
    with pytest.raises(MessageError):
        decompress_body(zlib.compress(plain)[:-5], 0x301)  # truncated


def test_a_zip_bomb_is_refused_before_it_is_inflated() -> None:
    bomb = zlib.compress(bytes(200 * 1024 * 1024), 9)  # 200 MiB of zeros in ~200 KiB
    with pytest.raises(MessageError, match="inflates past"):
        decompress_body(bomb, 0x301)
    assert len(decompress_body(zlib.compress(bytes(1000)), 0x1, max_bytes=1000)) == 1000
