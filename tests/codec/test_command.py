"""RemotingCommand: both header encodings, byte-exact on the golden frames, total on bad input."""

from __future__ import annotations

import dataclasses
import json
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codec import command as command_module  # its hot names: codec.implementation rebinds them
from codec.codes import FLAG_ONEWAY, FLAG_RESPONSE, LanguageCode, RequestCode, ResponseCode, SerializeType, code_name
from codec.command import RemotingCommand, decode_binary_with_construct
from codec.errors import CodecError, HeaderError
from codec.frame import encode_frame

from .golden import FRAME_A, FRAME_B
from .strategies import commands


def decode_frame(frame: bytes) -> RemotingCommand:
    return RemotingCommand.decode(frame[4:])


def test_golden_json_request_decodes_and_reencodes_byte_exact() -> None:
    cmd = decode_frame(FRAME_A)
    assert cmd == RemotingCommand(code=RequestCode.GET_ROUTEINFO_BY_TOPIC, opaque=7, ext_fields={"topic": "TopicTest"})
    assert cmd.encode() == FRAME_A


def test_golden_binary_response_decodes_and_reencodes_byte_exact() -> None:
    cmd = decode_frame(FRAME_B)
    assert cmd.code == ResponseCode.PULL_NOT_FOUND and cmd.is_response and not cmd.is_oneway
    assert cmd.serialize_type == SerializeType.ROCKETMQ and cmd.remark == "OFFSET_OVERFLOW_ONE"
    assert list(cmd.ext_fields.items()) == [
        ("suggestWhichBrokerId", "0"), ("nextBeginOffset", "5"), ("minOffset", "0"), ("maxOffset", "5")
    ]
    assert cmd.encode() == FRAME_B


def test_json_ext_fields_are_written_in_java_hashmap_order() -> None:
    cmd = decode_frame(FRAME_B)
    text = RemotingCommand.decode(
        RemotingCommand(**{**_fields(cmd), "serialize_type": SerializeType.JSON}).encode()[4:]
    )
    header = RemotingCommand(**{**_fields(text)}).encode()[8:]
    assert b'"extFields":{"suggestWhichBrokerId":"0","nextBeginOffset":"5","maxOffset":"5","minOffset":"0"}' in header


def _fields(cmd: RemotingCommand) -> dict:
    return {f: getattr(cmd, f) for f in cmd.__dataclass_fields__}


def test_response_keeps_opaque_and_serialize_type() -> None:
    request = decode_frame(FRAME_B)
    answer = request.response(ResponseCode.SUCCESS, remark="ok")
    assert (answer.opaque, answer.serialize_type, answer.flag) == (7, SerializeType.ROCKETMQ, FLAG_RESPONSE)


@pytest.mark.parametrize("frame", [FRAME_A, FRAME_B])
def test_decoded_and_response_commands_are_whole_frozen_values(frame: bytes) -> None:
    """Both are filled without the dataclass __init__: every field set, frozen, and equal to (and
    shown like) a command built the ordinary way."""
    request = decode_frame(frame)
    answer = request.response(ResponseCode.SYSTEM_ERROR, "no", {"k": "v"}, b"body")
    for command in (request, answer):
        rebuilt = RemotingCommand(**_fields(command))
        assert command == rebuilt and repr(command) == repr(rebuilt)
        with pytest.raises(dataclasses.FrozenInstanceError):
            command.code = 1  # type: ignore[misc]
    assert answer == RemotingCommand(
        code=ResponseCode.SYSTEM_ERROR, opaque=request.opaque, flag=FLAG_RESPONSE, remark="no", ext_fields={"k": "v"},
        body=b"body", serialize_type=request.serialize_type,
    )  # fmt: skip


def test_go_style_json_header_is_accepted() -> None:
    # rocketmq-client-go (jsoniter) writes struct order, an empty remark and language GO.
    header = b'{"code":11,"language":"GO","version":317,"opaque":3,"flag":0,"remark":"","extFields":{"topic":"T"}}'
    cmd = RemotingCommand.decode(struct.pack(">i", len(header)) + header)
    assert (cmd.code, cmd.language, cmd.version, cmd.remark) == (11, LanguageCode.GO, 317, "")


def test_language_may_be_an_ordinal_and_unknown_properties_are_ignored() -> None:
    header = b'{"code":34,"language":9,"opaque":1,"serializeTypeCurrentRPC":"JSON","future":[1]}'
    cmd = RemotingCommand.decode(struct.pack(">i", len(header)) + header)
    assert cmd.language == LanguageCode.GO


def test_numeric_ext_values_become_java_strings() -> None:
    header = b'{"code":14,"extFields":{"queueId":3,"flag":true}}'
    cmd = RemotingCommand.decode(struct.pack(">i", len(header)) + header)
    assert cmd.ext_fields == {"queueId": "3", "flag": "true"}


def test_unknown_codes_stay_representable() -> None:
    cmd = RemotingCommand(code=4242, flag=FLAG_ONEWAY)
    back = RemotingCommand.decode(cmd.encode()[4:])
    assert back.code == 4242 and back.is_oneway
    assert code_name(4242, response=False) == "4242"
    assert code_name(11, response=False) == "PULL_MESSAGE"


def test_pop_codes_do_not_fit_the_binary_header() -> None:
    with pytest.raises(HeaderError):
        RemotingCommand(code=RequestCode.POP_MESSAGE, serialize_type=SerializeType.ROCKETMQ).encode()


@pytest.mark.parametrize(
    "header",
    [
        b"{",
        b"[]",
        b'{"code":"x"}',
        b'{"code":4294967296}',
        b'{"code":1,"extFields":[]}',
        b'{"code":1,"extFields":{"a":{"b":1}}}',
        b'{"code":1,"remark":5}',
        b"\xff\xfe",
        b"[" * 100000,
    ],
)
def test_malformed_json_headers_are_header_errors(header: bytes) -> None:
    with pytest.raises(HeaderError) as info:
        RemotingCommand.decode(struct.pack(">i", len(header)) + header)
    assert info.value.close_connection


@pytest.mark.parametrize(
    "payload",
    [
        b"\x00\x00",  # no header length
        struct.pack(">i", 10) + b"{}",  # header length beyond the payload
        struct.pack(">i", (7 << 24) | 2) + b"{}",  # unknown serialize type
        struct.pack(">i", (1 << 24) | 3) + b"abc",  # binary header shorter than its fixed part
    ],
)
def test_malformed_payloads_are_header_errors(payload: bytes) -> None:
    with pytest.raises(HeaderError):
        RemotingCommand.decode(payload)


def test_binary_lengths_beyond_the_header_are_refused() -> None:
    good = RemotingCommand(code=1, remark="r", ext_fields={"k": "v"}, serialize_type=SerializeType.ROCKETMQ).encode()
    header = bytearray(good[8:])
    for offset in (13, 18 + 0, 22):  # remark length, ext length, first key length
        broken = bytearray(header)
        struct.pack_into(">i" if offset != 22 else ">h", broken, offset, 0x7FFF)
        with pytest.raises(HeaderError):
            RemotingCommand.decode(struct.pack(">i", (1 << 24) | len(broken)) + bytes(broken))


@given(commands())
def test_every_command_round_trips(cmd: RemotingCommand) -> None:
    frame = cmd.encode()
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    assert RemotingCommand.decode(frame[4:]) == cmd


@given(commands(serialize_type=SerializeType.ROCKETMQ))
def test_binary_fast_path_agrees_with_the_construct_declaration(cmd: RemotingCommand) -> None:
    header = cmd.encode_header()[8:]
    fast = RemotingCommand.decode(cmd.encode()[4:])
    spec = decode_binary_with_construct(header)
    assert {k: getattr(fast, k) for k in spec} == spec


@given(commands(serialize_type=SerializeType.JSON))
def test_json_header_is_standard_json(cmd: RemotingCommand) -> None:
    obj = json.loads(cmd.encode_header()[8:])
    assert obj["serializeTypeCurrentRPC"] == "JSON" and list(obj) == sorted(obj)


@given(st.binary(max_size=300))
def test_arbitrary_payloads_raise_only_codec_errors(payload: bytes) -> None:
    for stype in (0, 1):
        data = struct.pack(">i", (stype << 24) | min(len(payload), 0xFFFFFF)) + payload
        try:
            RemotingCommand.decode(data)
        except CodecError:
            pass


@given(commands(serialize_type=SerializeType.ROCKETMQ), st.data())
def test_mutated_binary_headers_raise_only_codec_errors(cmd: RemotingCommand, data: st.DataObject) -> None:
    frame = bytearray(cmd.encode())
    i = data.draw(st.integers(8, len(frame) - 1)) if len(frame) > 8 else 8
    if i < len(frame):
        frame[i] = data.draw(st.integers(0, 255))
    try:
        RemotingCommand.decode(bytes(frame[4:]))
    except CodecError:
        pass


def test_encode_frame_is_what_encode_writes() -> None:
    cmd = decode_frame(FRAME_A)
    assert cmd.encode() == encode_frame(0, FRAME_A[8:], b"")


_JSONISH = st.one_of(
    st.binary(max_size=40),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
        max_leaves=8,
    ).map(lambda v: json.dumps(v, ensure_ascii=False).encode("utf-8", "surrogatepass")),
    st.sampled_from([
        b'{"a":1,"a":2}', b"-0", b"-0.0", b"1.0", b"1e400", b"-1e400", b"18446744073709551616", b"-9223372036854775809",
        b'"\\ud800"', b'"\\udc00\\ud800"', b'"\xed\xa0\x80"', b"\xef\xbb\xbf{}", b"[" * 2000 + b"]" * 2000,
        b'{"a":"\x01"}', b"NaN", b"Infinity", b" {} ", b"\x00\x00\x00{",
    ]),
)


def _reference_decode(data: bytes) -> dict:
    """The JSON header decode as it was before orjson: json.loads' reading only."""
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise HeaderError(f"JSON header does not parse: {exc}", where=8) from None
    return command_module._header_fields(obj, exact=True)


def _decoded(data: bytes, decode) -> str:
    try:
        return repr(decode(data))  # repr: 1 and 1.0, or 0 and -0.0, must not pass as equal
    except HeaderError as exc:
        return f"refused: {exc}"


def _as_header(value: bytes) -> list[bytes]:
    """``value`` alone, and as an ext value and as the opaque of an otherwise valid header."""
    return [value, b'{"code":10,"extFields":{"k":' + value + b'}}', b'{"code":10,"opaque":' + value + b"}"]


@given(_JSONISH, st.sampled_from([b"", b" ", b"\n", b"}", b"x"]), st.sampled_from([b"", b" ", b"{"]))
def test_json_header_decode_agrees_with_json_loads(text: bytes, suffix: bytes, prefix: bytes) -> None:
    """orjson first, json.loads for what it refuses or may read differently: the same fields
    (types included) as json.loads' reading, or the same refusal."""
    for data in _as_header(prefix + text + suffix):
        assert _decoded(data, command_module._decode_json) == _decoded(data, _reference_decode)


@pytest.mark.parametrize("serialize", [SerializeType.JSON, SerializeType.ROCKETMQ])
def test_a_decoded_command_under_another_opaque_keeps_every_other_header_byte(serialize: int) -> None:
    """``with_opaque`` (relaying): the received header is patched, not written anew, and decodes
    to the same command with the new opaque; a header whose opaque is not found once is re-encoded."""
    ext = {"opaque": "7", "topic": "T", "note": '"opaque":7'}  # an ext key and a value that look like it
    sent = RemotingCommand(code=310, opaque=7, flag=0, remark="r", ext_fields=ext, body=b"b", version=401,
                           serialize_type=serialize, language=LanguageCode.GO)  # fmt: skip
    frame = sent.encode()
    received = RemotingCommand.decode(frame[4:])
    relayed = received.with_opaque(123456)
    again = RemotingCommand.decode(relayed.encode()[4:])
    assert again == dataclasses.replace(sent, opaque=123456)
    assert received.with_opaque(7).encode() == frame
    if serialize == SerializeType.ROCKETMQ:
        assert relayed.encode_header()[8:] == received.encode_header()[8:13] + struct.pack(">i", 123456) + \
            received.encode_header()[17:]  # fmt: skip


def test_a_json_header_written_by_another_client_is_patched_in_place() -> None:
    header = b'{"code":11,"language":"GO","version":317,"opaque":42,"flag":0,"extFields":{"topic":"T"}}'
    payload = struct.pack(">i", len(header)) + header
    received = RemotingCommand.decode(payload)
    relayed = received.with_opaque(9).encode()
    assert relayed[8:] == header.replace(b'"opaque":42', b'"opaque":9')
    assert RemotingCommand.decode(relayed[4:]).opaque == 9


def _numbers(payload: bytes) -> tuple[int, int, int]:
    decoded = RemotingCommand.decode(payload)
    return decoded.code, decoded.flag, decoded.opaque


def _agree(payload: bytes, reference, peeker) -> None:
    """``peeker`` returns what ``reference`` returns for ``payload``, or raises the same kind of error."""
    try:
        expected = reference(payload)
    except CodecError as exc:
        with pytest.raises(type(exc)):
            peeker(payload)
    else:
        assert peeker(payload) == expected


@given(commands())
def test_peek_reads_what_decode_reads(cmd: RemotingCommand) -> None:
    payload = cmd.encode()[4:]
    assert command_module.peek(payload) == _numbers(payload)


@given(st.binary(max_size=300), st.sampled_from([0, 1, 2]))
def test_peek_refuses_exactly_what_decode_refuses(header: bytes, stype: int) -> None:
    _agree(struct.pack(">i", (stype << 24) | len(header)) + header + b"body", _numbers, command_module.peek)


def test_peek_refuses_a_header_longer_than_its_frame() -> None:
    with pytest.raises(HeaderError):
        command_module.peek(struct.pack(">i", 40) + b'{"code":1}')


@given(commands())
def test_peek_answer_reads_what_decode_reads(cmd: RemotingCommand) -> None:
    payload = cmd.encode()[4:]
    assert command_module.peek_answer(payload) == _numbers(payload)


@pytest.mark.parametrize("header", [
    b'{"code":1,"extFields":{"opaque":"7"},"flag":1,"opaque":-5,"remark":"\\"opaque\\":9"}',
    b'{"xcode":5,"code":2,"flag":0,"opaque":3}',
    b'{"code":99999999999,"flag":0,"opaque":3}',  # past int32: peeked in full, which refuses it
    b'{"code":1,"flag":0}',  # no opaque where it stands: peeked in full, which reads its default
    b'{"code":1, "flag": 1, "opaque": 4}',  # spaces: not where it stands either
])  # fmt: skip
def test_peek_answer_agrees_with_peek_on_awkward_headers(header: bytes) -> None:
    _agree(struct.pack(">i", len(header)) + header, command_module.peek, command_module.peek_answer)


def test_peek_answer_trusts_what_it_does_not_read() -> None:
    header = b'{"code":01,"flag":1,"opaque":-0,"remark":}'  # not JSON: an upstream broker never writes this
    assert command_module.peek_answer(struct.pack(">i", len(header)) + header) == (1, 1, 0)
