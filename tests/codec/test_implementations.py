"""The compiled codec and its pure-Python twin side by side (issue 40): on random, chunked,
mutated and out-of-range input, and on the golden frames and the recorded Java session, each twin
returns the same value (types included) or raises the same exception with the same text and
``where``. The rest of tests/codec runs every test once on each; this module calls both directly.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codec import command, frame, headers, implementation, message
from codec.codes import LanguageCode, SerializeType
from codec.command import RemotingCommand
from codec.headers import REQUEST_HEADERS, RESPONSE_HEADERS
from codec.message import MAGIC_V1, MAGIC_V2, HostPort, Message
from tests.needs import skip_or_fail

from ..conftest import find_session_vectors
from .golden import FRAME_A, FRAME_B, MESSAGE_C
from .strategies import commands, host, int32, int64, messages, properties, text


@pytest.fixture(autouse=True)
def codec_implementation() -> Iterator[str]:
    """Overrides the conftest's: this module runs once and calls both twins itself."""
    if not implementation.available():
        skip_or_fail(f"compiled codec not available: {implementation.unavailable_reason()}")
    yield implementation.active()


def _twins(owner: Any, attr: str) -> tuple[Callable, Callable]:
    """(pure, compiled) of one hot name, as callables."""
    (hot,) = [h for h in implementation.HOT if h.owner is owner and h.attr == attr]
    if isinstance(hot.pure, classmethod):
        return hot.pure.__get__(None, owner), hot.compiled.__get__(None, owner)
    return hot.pure, hot.compiled


def _typed(value: Any) -> Any:
    """``value`` with the type of every part beside it, so 1 and True or an int and an enum differ."""
    if isinstance(value, dict):
        return ("dict", [(k, _typed(v)) for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_typed(v) for v in value])
    if hasattr(value, "__dict__") and not isinstance(value, type):
        return (type(value), _typed(vars(value)))
    return (type(value), value)


def _outcome(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """What ``fn`` returned (typed), or the exception's class, text and ``where``."""
    try:
        return ("returned", _typed(fn(*args, **kwargs)))
    except Exception as exc:
        return ("raised", type(exc), str(exc), getattr(exc, "where", None))


def _same(owner: Any, attr: str, *args: Any, **kwargs: Any) -> Any:
    pure, compiled = _twins(owner, attr)
    expected = _outcome(pure, *args, **kwargs)
    assert _outcome(compiled, *args, **kwargs) == expected
    return expected


def test_every_hot_name_has_a_distinct_compiled_twin() -> None:
    """``use`` can only switch what the table names; each entry must really have two objects."""
    for hot in implementation.HOT:
        assert hot.compiled is not None and hot.compiled is not hot.pure, hot.attr


def test_use_rebinds_every_hot_name_and_returns_the_previous_kind() -> None:
    before = implementation.use(implementation.PURE)
    try:
        assert all(h.owner.__dict__[h.attr] is h.pure for h in implementation.HOT)
        assert implementation.use(implementation.COMPILED) == implementation.PURE
        assert all(h.owner.__dict__[h.attr] is h.compiled for h in implementation.HOT)
        assert implementation.active() == implementation.COMPILED
        with pytest.raises(ValueError):
            implementation.use("fast")
    finally:
        implementation.use(before)


# --- frames ------------------------------------------------------------------------------------


def _feed_all(decoder_class: type, cap: int, chunks: list[bytes]) -> list:
    """Every ``feed`` outcome and the bytes held after it; a failed decoder is fed on, as a careless caller would."""
    outcomes: list = []
    try:
        decoder = decoder_class(cap)
    except Exception as exc:
        return [("raised", type(exc), str(exc))]
    for chunk in chunks:
        outcomes.append((_outcome(decoder.feed, chunk), decoder.buffered_bytes, decoder.max_frame_bytes))
    return outcomes


def _chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:])] or [b""]


frame_payloads = st.lists(st.binary(min_size=4, max_size=80), max_size=6)


@given(
    payloads=frame_payloads,
    lengths=st.lists(st.one_of(st.integers(-(2**31), 2**31 - 1), st.integers(-2, 90)), max_size=2),
    tail=st.binary(max_size=12),
    cuts=st.lists(st.integers(0, 2**16), max_size=12),
    cap=st.one_of(st.integers(-1, 200), st.just(frame.DEFAULT_MAX_FRAME_BYTES), st.just(2**70)),
)
def test_frame_decoders_agree_on_any_chunking(
    payloads: list[bytes], lengths: list[int], tail: bytes, cuts: list[int], cap: int
) -> None:
    """Whole frames, then arbitrary length prefixes (impossible, over the cap, partial) and junk,
    cut anywhere: the same payloads per feed, the same bytes held, the same FrameError."""
    data = b"".join(struct.pack(">i", len(p)) + p for p in payloads)
    data += b"".join(struct.pack(">i", n) for n in lengths) + tail
    pure, compiled = _twins(frame, "FrameDecoder")
    chunks = _chunked(data, cuts) + [b"\x00\x00\x00\x05abcde"]
    assert _feed_all(compiled, cap, chunks) == _feed_all(pure, cap, chunks)


def test_frame_decoders_agree_when_a_large_buffer_is_compacted() -> None:
    """Past 64 KiB consumed with a frame unfinished, both drop what was consumed the same way."""
    one = struct.pack(">i", 1000) + bytes(1000)
    data = one * 80 + struct.pack(">i", 50_000) + bytes(10)
    pure, compiled = _twins(frame, "FrameDecoder")
    chunks = [data, bytes(49_990), one]
    assert _feed_all(compiled, 1 << 20, chunks) == _feed_all(pure, 1 << 20, chunks)


def test_frame_decoders_accept_any_bytes_like_chunk_alike() -> None:
    pure, compiled = _twins(frame, "FrameDecoder")
    chunks: list[Any] = [bytearray(FRAME_A), memoryview(FRAME_B), "not bytes", None]
    assert _feed_all(compiled, 1024, chunks) == _feed_all(pure, 1024, chunks)


# --- remoting headers --------------------------------------------------------------------------


def _mutated(data: bytes, draw: st.DrawFn) -> bytes:
    """``data`` with some bytes overwritten, or cut short, or grown."""
    raw = bytearray(data)
    for _ in range(draw(st.integers(0, 4))):
        if raw:
            raw[draw(st.integers(0, len(raw) - 1))] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        raw = raw[: draw(st.integers(0, len(raw)))]
    return bytes(raw) + draw(st.binary(max_size=3))


@st.composite
def payloads(draw: st.DrawFn) -> bytes:
    """Frame payloads: encoded random commands, mutated or not, plus the golden frames."""
    source = draw(st.one_of(commands().map(lambda c: c.encode()[4:]), st.sampled_from([FRAME_A[4:], FRAME_B[4:]])))
    return _mutated(source, draw) if draw(st.booleans()) else source


@given(payloads())
def test_command_decode_agrees(payload: bytes) -> None:
    """Same command (every field, and the kept header it re-encodes from) or the same error."""
    outcome = _same(RemotingCommand, "decode", payload)
    if outcome[0] == "returned":
        pure, compiled = _twins(RemotingCommand, "decode")
        assert compiled(payload).encode() == pure(payload).encode()


@given(payloads())
def test_command_decode_agrees_on_bytearray_and_memoryview(payload: bytes) -> None:
    _same(RemotingCommand, "decode", bytearray(payload))
    _same(RemotingCommand, "decode", memoryview(payload))


@given(payloads(), st.sampled_from([b"", b'"code":7,', b'"opaque":-3}', b'"flag":12345678901,']))
def test_peeks_agree(payload: bytes, planted: bytes) -> None:
    """``peek`` and ``peek_answer``: the same numbers or the same error, also where a number the
    answer's reader looks for is planted in the header (mutated payloads keep their length word)."""
    _same(command, "peek", payload)
    _same(command, "peek_answer", payload)
    if len(payload) >= 4 and planted:
        (word,) = struct.unpack_from(">i", payload)
        header_len = (word & 0xFFFFFF) + 2 * len(planted)
        if header_len <= 0xFFFFFF:
            at = 4 + (word & 0xFFFFFF)
            grown = (struct.pack(">i", (word & ~0xFFFFFF) | header_len) + planted + payload[4:at] + planted
                     + payload[at:])  # fmt: skip
            _same(command, "peek", grown)
            _same(command, "peek_answer", grown)


@given(payloads())
def test_peeks_agree_on_bytearray(payload: bytes) -> None:
    _same(command, "peek", bytearray(payload))
    _same(command, "peek_answer", bytearray(payload))


@st.composite
def binary_headers(draw: st.DrawFn) -> bytes:
    header = draw(commands(SerializeType.ROCKETMQ)).encode_header()[8:]
    return _mutated(header, draw) if draw(st.booleans()) else header


@given(binary_headers())
def test_binary_header_decode_agrees(header: bytes) -> None:
    _same(command, "_decode_binary", header)


def test_binary_header_decode_agrees_on_every_error() -> None:
    """One header per error the decoder names, so each message and ``where`` is compared at least once."""
    fixed = struct.pack(">hbhii", 10, 0, 409, 7, 0)
    ext = struct.pack(">h", 1) + b"k" + struct.pack(">i", 1) + b"v"
    cases = [
        b"\x00" * 20,
        fixed + struct.pack(">i", -1) + struct.pack(">i", 0),
        fixed + struct.pack(">i", 1) + b"\xff" + struct.pack(">i", 0),
        fixed + struct.pack(">i", 0) + struct.pack(">i", 5),
        fixed + struct.pack(">i", 0) + struct.pack(">i", 1) + b"\x00",
        fixed + struct.pack(">i", 0) + struct.pack(">i", 6) + struct.pack(">h", -1) + b"\x00" * 4,
        fixed + struct.pack(">i", 0) + struct.pack(">i", 7) + struct.pack(">h", 1) + b"\xff" + struct.pack(">i", 0),
        fixed + struct.pack(">i", 0) + struct.pack(">i", 7) + struct.pack(">h", 1) + b"k" + struct.pack(">i", 9),
        fixed + struct.pack(">i", 0) + struct.pack(">i", 8) + struct.pack(">h", 1) + b"k" + struct.pack(">i", 1) + b"\xff",
        fixed + struct.pack(">i", 0) + struct.pack(">i", len(ext)) + ext,
    ]  # fmt: skip
    outcomes = [_same(command, "_decode_binary", case) for case in cases]
    assert [o[0] for o in outcomes] == ["raised"] * 9 + ["returned"]


def test_binary_key_cache_stays_bounded_under_both() -> None:
    """Both twins fill the one ``_KEY_CACHE`` and stop at its 4096 keys."""
    pure, compiled = _twins(command, "_decode_binary")
    fixed = struct.pack(">hbhii", 10, 0, 409, 7, 0) + struct.pack(">i", 0)
    for decode in (pure, compiled):
        for i in range(5000):
            key = f"key-{decode is pure}-{i}".encode()
            entry = struct.pack(">h", len(key)) + key + struct.pack(">i", 1) + b"v"
            assert decode(fixed + struct.pack(">i", len(entry)) + entry)["ext_fields"] == {key.decode(): "v"}
        assert len(command._KEY_CACHE) <= 4096


out_of_range = st.one_of(int32, st.integers(-(2**40), 2**40), st.sampled_from([True, None, "7", 1.5, LanguageCode.GO]))


@given(
    cmd=commands(),
    fields=st.dictionaries(st.sampled_from(["code", "language", "version", "opaque", "flag"]), out_of_range, max_size=2),
    remark=st.one_of(st.none(), text, st.just(b"raw"), st.just("\udc80")),
    ext=st.one_of(st.none(), st.dictionaries(text, text, max_size=4), st.just({"k": 1}), st.just({1: "v"}),
                  st.just({"k" * 40000: "v"}), st.just({"lone": "\ud800"})),
)  # fmt: skip
def test_header_encoders_agree(cmd: RemotingCommand, fields: dict, remark: Any, ext: Any) -> None:
    """Both header encodings, on commands with out-of-range, mistyped or unencodable fields too."""
    for candidate in (cmd, dataclasses.replace(cmd, remark=remark, ext_fields=ext, **fields)):
        _same(command, "_encode_binary", candidate)
        _same(command, "_encode_json", candidate)


@given(
    cmd=commands(),
    decoded=st.booleans(),
    opaque=int32,
    serialize_type=st.sampled_from([0, 1, SerializeType.JSON, SerializeType.ROCKETMQ, 2, -1, 2**40, "0", None]),
    body=st.one_of(st.binary(max_size=8), st.just(bytearray(b"ba")), st.just("str")),
)
def test_frame_header_encoders_agree(cmd: RemotingCommand, decoded: bool, opaque: int, serialize_type: Any,
                                     body: Any) -> None:
    """``encode_header``: fresh commands, decoded ones relayed under another opaque (their kept
    header patched), and ones with an odd serialize type or body."""
    _same(RemotingCommand, "encode_header", cmd)
    _same(RemotingCommand, "encode_header", dataclasses.replace(cmd, serialize_type=serialize_type, body=body))
    if decoded:
        relayed = RemotingCommand.decode(cmd.encode()[4:]).with_opaque(opaque)
        _same(RemotingCommand, "encode_header", relayed)


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False), text),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(text, inner, max_size=3)),
    max_leaves=8,
)


@st.composite
def json_headers(draw: st.DrawFn) -> bytes:
    """Encoded commands (maybe mutated), or objects with header names and values of any JSON type."""
    if draw(st.booleans()):
        header = draw(commands(SerializeType.JSON)).encode_header()[8:]
        return _mutated(header, draw) if draw(st.booleans()) else header
    names = st.sampled_from(["code", "language", "version", "opaque", "flag", "remark", "extFields"])
    obj = draw(st.dictionaries(names, st.one_of(json_values, st.dictionaries(text, json_values, max_size=3))))
    return json.dumps(obj).encode()


@given(json_headers())
def test_json_header_decode_agrees(header: bytes) -> None:
    _same(command, "_decode_json", header)


@given(json_values, st.booleans())
def test_json_header_fields_agree_on_any_parsed_value(obj: Any, exact: bool) -> None:
    _same(command, "_header_fields", obj, exact=exact)


# --- typed headers -----------------------------------------------------------------------------

CODECS = sorted({*REQUEST_HEADERS.values(), *RESPONSE_HEADERS.values()}, key=lambda c: c.java_name + str(c.fast))
ext_text = st.one_of(
    text,
    st.integers(-(2**70), 2**70).map(str),
    st.text("0123456789", max_size=22),
    st.sampled_from(["", "true", "false", "TRUE", " 1", "+1", "-0", "٣", "²", "1_000", "0x1f"]),
)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.java_name)
@given(data=st.data())
def test_typed_header_decode_agrees(codec: headers.HeaderCodec, data: st.DataObject) -> None:
    """Each header's own fields with any text (numbers in and out of range, digits of other
    scripts), some left out: the same typed header or the same CustomHeaderError."""
    wires = [f.wire for f in codec.fields]
    ext = data.draw(st.dictionaries(st.sampled_from(wires) if wires else text, ext_text, max_size=len(wires) + 1))
    _same(headers.HeaderCodec, "decode", codec, ext)
    _same(headers.HeaderCodec, "decode", codec, None)
    _same(headers.HeaderCodec, "decode", codec, _Mapping(ext))
    if ext:
        key = next(iter(ext))
        _same(headers.HeaderCodec, "decode", codec, {**ext, key: 7})


class _Mapping(dict):
    """A mapping that is not a plain dict (the compiled twin reads it through ``get``)."""

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key, default)


# --- properties --------------------------------------------------------------------------------


@given(st.one_of(st.text(st.sampled_from("ab\x01\x02é\udc80"), max_size=24), st.just(b"a\x01b"), st.none()))
def test_property_string_parsers_agree(text: Any) -> None:
    """Empty names and values, names with no value, runs of separators, trailing ones, duplicates."""
    _same(message, "string_to_properties", text)


@given(st.one_of(properties, st.dictionaries(text, text, max_size=4), st.just({"k": 1}), st.just({2: "v"}),
                 st.just([("k", "v")])))  # fmt: skip
def test_property_string_writers_agree(props: Any) -> None:
    _same(message, "properties_to_string", props)


# --- stored records ----------------------------------------------------------------------------


@given(
    msg=messages(),
    fields=st.dictionaries(
        st.sampled_from(["queue_id", "flag", "queue_offset", "physical_offset", "sys_flag", "born_timestamp",
                         "store_timestamp", "reconsume_times", "prepared_transaction_offset", "body_crc", "magic"]),
        st.one_of(int64, st.integers(-(2**70), 2**70), st.sampled_from([None, True, "1", MAGIC_V1, MAGIC_V2])),
        max_size=2,
    ),
    born=st.one_of(host, st.builds(HostPort, st.just("10.0.0.1"), st.integers(-(2**33), 2**33))),
    topic=st.one_of(st.text(max_size=30), st.just("t" * 200)),
    body=st.one_of(st.binary(max_size=64), st.just(bytearray(b"ba")), st.just("str")),
    props=st.one_of(properties, st.just({"k": "v" * 40000})),
)  # fmt: skip
def test_record_encoders_agree(
    msg: Message, fields: dict, born: HostPort, topic: str, body: Any, props: dict
) -> None:
    """Random records, then the same with fields out of range or mistyped, long topics and
    properties, other body types: the same bytes or the same MessageError (or TypeError)."""
    _same(message, "encode_message", msg)
    _same(message, "encode_message", dataclasses.replace(msg, born_host=born, topic=topic, body=body,
                                                         properties=props, **fields))  # fmt: skip


def test_golden_record_encodes_identically() -> None:
    decoded, _ = message.decode_message(MESSAGE_C)
    assert _same(message, "encode_message", decoded) == ("returned", (bytes, MESSAGE_C))


# --- golden frames and the recorded session ----------------------------------------------------


def _session_frames() -> list[bytes]:
    lines = find_session_vectors().read_text().splitlines()
    return [bytes.fromhex(json.loads(line)["frame_hex"]) for line in lines if line.strip()]


def test_golden_frames_and_the_recorded_session_decode_identically() -> None:
    """Every frame split, decoded, typed (request and response headers) and re-encoded through
    each twin: the same commands, headers and bytes."""
    frames = [FRAME_A, FRAME_B, *_session_frames()]
    stream = b"".join(frames)
    pure_split, compiled_split = _twins(frame, "FrameDecoder")
    assert compiled_split().feed(stream) == pure_split().feed(stream) == [f[4:] for f in frames]
    pure_decode, compiled_decode = _twins(RemotingCommand, "decode")
    for raw in frames:
        _same(RemotingCommand, "decode", raw[4:])
        cmd = pure_decode(raw[4:])
        assert compiled_decode(raw[4:]).encode() == raw
        _same(command, "_encode_json", cmd)
        _same(command, "_encode_binary", cmd)
        codecs = set(RESPONSE_HEADERS.values()) if cmd.is_response else {REQUEST_HEADERS.get(cmd.code)} - {None}
        for codec in codecs:  # an answer does not say what it answers: every response header
            _same(headers.HeaderCodec, "decode", codec, cmd.ext_fields)
