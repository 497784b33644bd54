"""``RemotingCommand``: the remoting header plus body, and both header encodings.

A frame payload (what ``FrameDecoder`` yields) is ``type_and_len:int32`` (high byte serialize type,
low 24 bits header length), the header, then the body. The header is either fastjson JSON
(type 0) or ``RocketMQSerializable`` binary (type 1); we decode whichever the peer used and
``RemotingCommand.serialize_type`` remembers it so the answer goes back in the same one
(docs/protocol.md, Headers). ``BINARY_HEADER`` below is the construct declaration of the binary layout, the
single spec; ``_decode_binary``/``_encode_binary`` are its ``struct`` fast path, tested against it.

Byte-exactness with Java: JSON properties are written alphabetically with nulls omitted, compact,
and ``extFields`` in Java ``HashMap`` order (``javacompat.hashmap_order``), as fastjson writes a
``RemotingCommand``. The binary encoding writes ``ext_fields`` in the mapping's own order, since
Java's fast headers (``FastCodesHeader``) append their fields in declaration order.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import struct
from collections.abc import Mapping

from construct import GreedyBytes, GreedyRange, Int8sb, Int16sb, Int32sb, PascalString, Prefixed, Struct, Terminated
from orjson import JSONDecodeError as _OrjsonError
from orjson import loads as _orjson_loads

from .codes import FLAG_ONEWAY, FLAG_RESPONSE, LanguageCode, SerializeType
from .errors import CodecError, HeaderError
from .frame import frame_prefix
from .javacompat import INT32_MAX, INT32_MIN, hashmap_order, java_str

#: MQVersion ordinal we stamp on what we send: 4.9.8 (V4_9_8). The Java client stores the
#: HEART_BEAT response's version as the broker version and refuses SQL92 below 232.
DEFAULT_VERSION = 409

BINARY_HEADER = Struct(
    "code" / Int16sb,
    "language" / Int8sb,
    "version" / Int16sb,
    "opaque" / Int32sb,
    "flag" / Int32sb,
    "remark" / Prefixed(Int32sb, GreedyBytes),
    "ext" / Prefixed(
        Int32sb,
        GreedyRange(Struct("key" / PascalString(Int16sb, "utf8"), "value" / PascalString(Int32sb, "utf8"))),
    ),
    Terminated,
)

_BINARY_HEADER_COMPILED = BINARY_HEADER.compile()
_FIXED = struct.Struct(">hbhii")
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_LANGUAGE_BY_NAME = {c.name: c for c in LanguageCode}
_LANGUAGE_BY_VALUE = {c.value: c for c in LanguageCode}
_encode_str = json.encoder.encode_basestring  # type: ignore[attr-defined]
# Ext field names repeat across every frame; decoding each once saves a fifth of a binary header
# decode. Bounded, so a hostile peer cannot grow it.
_KEY_CACHE: dict[bytes, str] = {}


@dataclasses.dataclass(frozen=True)
class RemotingCommand:
    """One request or response. ``code`` is an int so unknown codes survive; ``body`` b"" = none.

    Every request makes two (the decoded request and its answer), so those two are filled through
    ``_filled`` rather than the frozen ``__init__``, which pays ``object.__setattr__`` per field
    (1.2 of 1.45 µs). No slots, for that reason: the instance ``__dict__`` is what gets filled.
    """

    code: int
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: Mapping[str, str] | None = None
    body: bytes = b""
    language: int = LanguageCode.JAVA
    version: int = DEFAULT_VERSION
    serialize_type: int = SerializeType.JSON

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    def response(
        self,
        code: int,
        remark: str | None = None,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
        version: int = DEFAULT_VERSION,
    ) -> RemotingCommand:
        """The answer to this request: same opaque and serialize type, response flag set."""
        return _filled(
            code=code,
            opaque=self.opaque,
            flag=FLAG_RESPONSE,
            remark=remark,
            ext_fields=ext_fields,
            body=body,
            language=LanguageCode.JAVA,
            version=version,
            serialize_type=self.serialize_type,
        )

    def with_opaque(self, opaque: int) -> RemotingCommand:
        """This command under another opaque: what relaying changes. A decoded command keeps the
        header bytes it came in, and encodes by patching their opaque rather than writing them anew
        (what a proxy does twice per request), so every other byte of the header is the sender's."""
        fields = dict(self.__dict__)
        fields["opaque"] = opaque
        return _with_fields(fields)

    def encode_header(self) -> bytes:
        """Length prefix, type/length word and header; write the body after it."""
        raw = self.__dict__.get("_raw")
        if raw is not None:
            header = _repatched(raw, self.opaque, self.serialize_type)
            if header is not None:
                return frame_prefix(self.serialize_type, len(header), len(self.body)) + header
        if self.serialize_type == SerializeType.ROCKETMQ:
            header = _encode_binary(self)
        elif self.serialize_type == SerializeType.JSON:
            header = _encode_json(self)
        else:
            raise HeaderError(f"unknown serialize type {self.serialize_type}")
        return frame_prefix(self.serialize_type, len(header), len(self.body)) + header

    def encode(self) -> bytes:
        """The whole frame, length prefix included."""
        return self.encode_header() + self.body

    @classmethod
    def decode(cls, payload: bytes) -> RemotingCommand:
        """Decode a frame payload (the bytes after the length prefix)."""
        fields, header_end = _split_header(payload)
        fields["body"] = bytes(payload[header_end:])
        return _with_fields(fields)


def _split_header(payload: bytes) -> tuple[dict, int]:
    """The header properties of a frame payload, checked (``HeaderError`` when they cannot be
    read), with ``serialize_type`` and ``_raw`` (the header bytes and the opaque they had: see
    ``with_opaque``; not a field, equality ignores it) among them; and where the body begins."""
    if len(payload) < 4:
        raise HeaderError(f"frame payload of {len(payload)} bytes has no header length", where=0)
    (word,) = _INT32.unpack_from(payload, 0)
    serialize_type = (word >> 24) & 0xFF
    header_len = word & 0xFFFFFF
    if header_len > len(payload) - 4:
        raise HeaderError(f"header length {header_len} exceeds frame payload {len(payload) - 4}", where=4)
    header = payload[4 : 4 + header_len]
    if serialize_type == SerializeType.JSON:
        fields = _decode_json(header)
    elif serialize_type == SerializeType.ROCKETMQ:
        fields = _decode_binary(header)
    else:
        raise HeaderError(f"unknown serialize type {serialize_type}", where=4)
    fields["serialize_type"] = serialize_type
    fields["_raw"] = (header, fields["opaque"])
    return fields, 4 + header_len


def peek(payload: bytes) -> tuple[int, int, int]:
    """(code, flag, opaque) of a frame payload whose header is valid as ``decode`` reads it (the
    same ``HeaderError`` when not), without building the command or copying its body: what a
    relay that passes frames on as bytes needs to know of them."""
    fields, _ = _split_header(payload)
    return fields["code"], fields["flag"], fields["opaque"]


#: Where ``peek_answer`` finds each number of a JSON header: the first ``"key":`` followed by an
#: optional minus, one to ten digits, and the end of the value.
_NUMBER_AT = tuple(re.compile(rb'"%s":(-?[0-9]{1,10})[,}]' % key) for key in (b"code", b"flag", b"opaque"))


def peek_answer(payload: bytes) -> tuple[int, int, int]:
    """``peek`` for a frame from a peer trusted to write valid headers (an upstream broker): its
    code, flag and opaque read where they stand (the binary header's fixed fields; the first
    ``"key":<int32>`` of a JSON header: in valid JSON that can only be the property itself, as ext
    field values are strings), nothing else checked. A header they cannot be read from that way
    is ``peek``ed."""
    size = len(payload)
    if size >= 4:
        (word,) = _INT32.unpack_from(payload, 0)
        end = 4 + (word & 0xFFFFFF)
        serialize_type = (word >> 24) & 0xFF
        if end <= size and serialize_type == SerializeType.JSON:
            values = []
            for number_at in _NUMBER_AT:
                found = number_at.search(payload, 4, end)
                if found is None:
                    break
                value = int(found.group(1))
                if not INT32_MIN <= value <= INT32_MAX:
                    break
                values.append(value)
            else:
                return values[0], values[1], values[2]
        elif end <= size and serialize_type == SerializeType.ROCKETMQ and end - 4 >= 21:
            code, _language, _version, opaque, flag = _FIXED.unpack_from(payload, 4)
            return code, flag, opaque
    return peek(payload)


def _repatched(raw: tuple[bytes, int], opaque: int, serialize_type: int) -> bytes | None:
    """The received header ``raw`` (bytes, the opaque it had) with ``opaque`` in it, or None when
    the opaque cannot be found exactly once (then the header is written anew)."""
    header, had = raw
    if opaque == had:
        return header
    if serialize_type == SerializeType.ROCKETMQ:
        return header[:5] + _INT32.pack(opaque) + header[9:]
    needle = b'"opaque":%d' % had
    at = header.find(needle)
    end = at + len(needle)
    if at < 0 or header[end : end + 1] not in (b",", b"}") or header.find(needle, end) >= 0:
        return None
    return header[:at] + b'"opaque":%d' % opaque + header[end:]


def _with_fields(fields: dict) -> RemotingCommand:
    """A ``RemotingCommand`` whose ``__dict__`` is ``fields`` (all nine, and ``_raw`` if decoded), without the frozen
    ``__init__``; ``fields`` becomes the command's, so the caller must not keep it."""
    command = object.__new__(RemotingCommand)
    object.__setattr__(command, "__dict__", fields)
    return command


def _filled(**fields: object) -> RemotingCommand:
    """``_with_fields`` from keyword arguments."""
    return _with_fields(fields)


_JSON_LANGUAGE = {c.value: f'"{c.name}"' for c in LanguageCode}  # language as fastjson writes it


@functools.lru_cache(maxsize=1024)
def _json_ext_keys(keys: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """Each ext key with its JSON text and colon, in Java ``HashMap`` order (answers reuse a
    handful of key sets)."""
    return tuple((k, _encode_str(k) + ":") for k in hashmap_order(keys))


def _encode_json(cmd: RemotingCommand) -> bytes:
    ext = cmd.ext_fields
    if ext is None:
        ext_text = ""
    else:
        items = ",".join([key_text + _encode_str(ext[k]) for k, key_text in _json_ext_keys(tuple(ext))])
        ext_text = f',"extFields":{{{items}}}'
    language = _JSON_LANGUAGE.get(cmd.language) or str(cmd.language)
    remark = "" if cmd.remark is None else ',"remark":' + _encode_str(cmd.remark)
    return (
        f'{{"code":{cmd.code}{ext_text},"flag":{cmd.flag},"language":{language},"opaque":{cmd.opaque}{remark}'
        f',"serializeTypeCurrentRPC":"JSON","version":{cmd.version}}}'
    ).encode("utf-8", "surrogatepass")


def _int32(obj: dict, key: str, default: int) -> int:
    value = obj.get(key, default)
    if type(value) is int and INT32_MIN <= value <= INT32_MAX:
        return value
    if value is None:
        return default
    if isinstance(value, str) and value.lstrip("-").isdigit():
        value = int(value)  # fastjson coerces numeric strings into int properties
    if type(value) is not int or not INT32_MIN <= value <= INT32_MAX:
        raise HeaderError(f"header property {key!r} is not a 32-bit integer: {value!r:.60}")
    return value


class _Inexact(Exception):
    """orjson's reading of a header may differ from json.loads' in a value that is used."""


def _decode_json(header: bytes) -> dict:
    """The header's properties, as ``json.loads`` reads them. orjson reads a usual header at half
    the cost; json.loads reads it again when orjson refuses it (NaN, lone surrogate escapes, bad
    UTF-8...), when the header is invalid (so errors are json's), or when an ext value is a float
    (orjson reads integers beyond 64 bits as floats)."""
    try:
        return _header_fields(_orjson_loads(header), exact=False)
    except (_OrjsonError, HeaderError, _Inexact):
        pass
    try:
        obj = json.loads(header)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise HeaderError(f"JSON header does not parse: {exc}", where=8) from None
    return _header_fields(obj, exact=True)


def _header_fields(obj: object, *, exact: bool) -> dict:
    if not isinstance(obj, dict):
        raise HeaderError(f"JSON header is a {type(obj).__name__}, not an object", where=8)
    language = obj.get("language", "JAVA")
    if isinstance(language, str):
        language = _LANGUAGE_BY_NAME.get(language, LanguageCode.OTHER)
    elif type(language) is not int or not 0 <= language <= 127:
        raise HeaderError(f"header property 'language' is invalid: {language!r:.60}")
    remark = obj.get("remark")
    if remark is not None and not isinstance(remark, str):
        raise HeaderError(f"header property 'remark' is not a string: {remark!r:.60}")
    ext = obj.get("extFields")
    if ext is not None:
        if not isinstance(ext, dict):
            raise HeaderError(f"extFields is a {type(ext).__name__}, not an object")
        for key, value in ext.items():
            if value.__class__ is not str:  # JSON yields no str subclasses
                if value is None or isinstance(value, (dict, list)):
                    raise HeaderError(f"extFields value of {key!r} is not a scalar: {value!r:.60}")
                if value.__class__ is float and not exact:
                    raise _Inexact
                ext[key] = java_str(value)  # Java coerces numbers and booleans to strings
    return {
        "code": _int32(obj, "code", 0),
        "language": language,
        "version": _int32(obj, "version", 0),
        "opaque": _int32(obj, "opaque", 0),
        "flag": _int32(obj, "flag", 0),
        "remark": remark,
        "ext_fields": ext,
    }


def _encode_binary(cmd: RemotingCommand) -> bytes:
    if not -32768 <= cmd.code <= 32767 or not -32768 <= cmd.version <= 32767:
        raise HeaderError(f"code {cmd.code} / version {cmd.version} do not fit the int16 binary header")
    try:
        parts = [_FIXED.pack(cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag)]
    except struct.error as exc:
        raise HeaderError(f"binary header field out of range: {exc}") from None
    remark = cmd.remark.encode("utf-8", "surrogatepass") if cmd.remark else b""
    parts += (_INT32.pack(len(remark)), remark)
    ext_parts = []
    for key, value in (cmd.ext_fields or {}).items():
        k = key.encode("utf-8", "surrogatepass")
        v = value.encode("utf-8", "surrogatepass")
        if len(k) > 32767:
            raise HeaderError(f"ext field name of {len(k)} bytes exceeds the int16 length")
        ext_parts += (_INT16.pack(len(k)), k, _INT32.pack(len(v)), v)
    ext = b"".join(ext_parts)
    parts += (_INT32.pack(len(ext)), ext)
    return b"".join(parts)


def _decode_binary(header: bytes) -> dict:
    size = len(header)
    if size < 21:
        raise HeaderError(f"binary header of {size} bytes is shorter than its 21 fixed bytes", where=8)
    code, language, version, opaque, flag = _FIXED.unpack_from(header, 0)
    (remark_len,) = _INT32.unpack_from(header, 13)
    pos = 17
    if remark_len < 0 or remark_len > size - pos - 4:
        raise HeaderError(f"binary remark length {remark_len} does not fit the header", where=8 + 13)
    try:
        remark = header[pos : pos + remark_len].decode("utf-8") if remark_len else None
    except UnicodeDecodeError as exc:
        raise HeaderError(f"binary remark is not UTF-8: {exc.reason}", where=8 + pos) from None
    pos += remark_len
    (ext_len,) = _INT32.unpack_from(header, pos)
    pos += 4
    if ext_len < 0 or ext_len != size - pos:
        raise HeaderError(f"binary extFields length {ext_len} but {size - pos} bytes remain", where=8 + pos - 4)
    ext: dict[str, str] | None = {} if ext_len else None
    keys = _KEY_CACHE
    i16 = _INT16.unpack_from
    i32 = _INT32.unpack_from
    try:
        while pos < size:
            (key_len,) = i16(header, pos)
            end = pos + 2 + key_len
            if key_len < 0 or end + 4 > size:
                raise HeaderError(f"binary ext key length {key_len} does not fit", where=8 + pos)
            raw_key = header[pos + 2 : end]
            key = keys.get(raw_key)
            if key is None:
                key = raw_key.decode("utf-8")
                if len(keys) < 4096:
                    keys[raw_key] = key
            (val_len,) = i32(header, end)
            pos = end + 4 + val_len
            if val_len < 0 or pos > size:
                raise HeaderError(f"binary ext value length {val_len} for {key!r} does not fit", where=8 + end)
            ext[key] = header[end + 4 : pos].decode("utf-8")  # type: ignore[index]
    except UnicodeDecodeError as exc:
        raise HeaderError(f"binary ext field is not UTF-8: {exc.reason}", where=8 + pos) from None
    except struct.error:
        raise HeaderError("binary ext entry truncated", where=8 + pos) from None
    return {
        "code": code,
        "language": _LANGUAGE_BY_VALUE.get(language, language),
        "version": version,
        "opaque": opaque,
        "flag": flag,
        "remark": remark,
        "ext_fields": ext,
    }


def decode_binary_with_construct(header: bytes) -> dict:
    """Decode a binary header through the construct declaration (the spec the fast path follows)."""
    try:
        parsed = _BINARY_HEADER_COMPILED.parse(header)
    except Exception as exc:  # construct raises its own tree and some builtins; all mean malformed
        raise HeaderError(f"binary header does not parse: {exc}") from None
    return {
        "code": parsed.code,
        "language": _LANGUAGE_BY_VALUE.get(parsed.language, parsed.language),
        "version": parsed.version,
        "opaque": parsed.opaque,
        "flag": parsed.flag,
        "remark": parsed.remark.decode("utf-8") if parsed.remark else None,
        "ext_fields": {e.key: e.value for e in parsed.ext} if parsed.ext else None,
    }


__all__ = ["BINARY_HEADER", "DEFAULT_VERSION", "CodecError", "RemotingCommand", "decode_binary_with_construct", "peek", "peek_answer"]
