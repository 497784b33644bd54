"""Stored/wire message records, batch bodies, properties, message ids and tag hashes.

A pull, VIEW_MESSAGE_BY_ID or QUERY_MESSAGE body is stored records back to back; a
SEND_BATCH_MESSAGE body is batch items back to back (docs/protocol.md, Send). ``MESSAGE`` and
``BATCH_ITEM`` are the construct declarations, the single spec; ``decode_messages`` /
``encode_message`` are a ``struct`` fast path over the same layout, tested record for record
against them. Every length is checked before it is used, so truncated or hostile input raises
``MessageError`` with the offset of the record and field, never an IndexError or struct.error.

Invariants kept on encode: v1 records unless asked (4.9.x and Go readers cannot read v2); the
V6 sysflag bits are set exactly when a host has a 16-byte address; ``body_crc`` defaults to
``crc32(body) & 0x7FFFFFFF``; properties are written without a trailing separator (Java ≥ 4.9.1)
and read with or without one.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import socket
import struct
import zlib
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

try:  # the same CRC-32 as zlib's, with SIMD: ~7x faster on a 1 KiB body (every put computes one)
    from zlib_ng.zlib_ng import crc32
except ImportError:  # pragma: no cover - zlib-ng is a dependency; this keeps the codec importable
    from zlib import crc32

from construct import (
    Bytes,
    Const,
    GreedyBytes,
    IfThenElse,
    Int8sb,
    Int16sb,
    Int32sb,
    Int32ub,
    Int64sb,
    PascalString,
    Prefixed,
    Struct,
    this,
)

from .errors import MessageError
from .javacompat import string_hash

MAGIC_V1 = 0xDAA320A7
MAGIC_V2 = 0xDAA320AB

# MessageSysFlag (4.9.8, unchanged in 5.3.x)
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_TYPE_MASK = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOST_V6_FLAG = 0x20
COMPRESSION_TYPE_MASK = 0x700
COMPRESSION_LZ4 = 0x100
COMPRESSION_ZSTD = 0x200
COMPRESSION_ZLIB = 0x300

PROPERTY_SEPARATOR = "\x02"
NAME_VALUE_SEPARATOR = "\x01"
# A pair starts the string or follows \x02; name up to the first \x01; value up to the next \x02.
_PAIR = re.compile("(?<![^\x02])([^\x01\x02]+)\x01([^\x02]+)")

MAX_TOPIC_BYTES_V1 = 127
MAX_PROPERTIES_BYTES = 32767


def _host(flag: int) -> Struct:
    return Struct("ip" / IfThenElse(this._.sys_flag & flag, Bytes(16), Bytes(4)), "port" / Int32sb)


MESSAGE = Struct(
    "total_size" / Int32sb,
    "magic" / Int32ub,
    "body_crc" / Int32sb,
    "queue_id" / Int32sb,
    "flag" / Int32sb,
    "queue_offset" / Int64sb,
    "physical_offset" / Int64sb,
    "sys_flag" / Int32sb,
    "born_timestamp" / Int64sb,
    "born_host" / _host(BORNHOST_V6_FLAG),
    "store_timestamp" / Int64sb,
    "store_host" / _host(STOREHOST_V6_FLAG),
    "reconsume_times" / Int32sb,
    "prepared_transaction_offset" / Int64sb,
    "body" / Prefixed(Int32sb, GreedyBytes),
    "topic" / IfThenElse(this.magic == MAGIC_V2, PascalString(Int16sb, "utf8"), PascalString(Int8sb, "utf8")),
    "properties" / Prefixed(Int16sb, GreedyBytes),
)

BATCH_ITEM = Struct(
    "total_size" / Int32sb,
    "magic" / Const(0, Int32sb),
    "body_crc" / Const(0, Int32sb),
    "flag" / Int32sb,
    "body" / Prefixed(Int32sb, GreedyBytes),
    "properties" / Prefixed(Int16sb, GreedyBytes),
)

# Compiled once (construct generates and compiles a parser: ~5x faster than interpreting).
_MESSAGE_COMPILED = MESSAGE.compile()
_BATCH_ITEM_COMPILED = BATCH_ITEM.compile()


class HostPort(NamedTuple):
    """An IPv4 or IPv6 address (text form) and port, as in BORNHOST/STOREHOST."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"

    @classmethod
    def parse(cls, text: str) -> HostPort:
        """``ip:port`` (IPv6 with or without brackets; the port follows the last colon)."""
        host, sep, port = text.rpartition(":")
        if not sep or not port.isdigit():
            raise MessageError(f"address {text!r} is not ip:port")
        host = host.strip("[]")
        _pack_ip(host)
        return cls(host, int(port))


_NO_HOST = HostPort("0.0.0.0", 0)


def _pack_ip(host: str) -> bytes:
    try:
        return socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
    except OSError:
        raise MessageError(f"not an IP address: {host!r}") from None


@functools.lru_cache(maxsize=1024)
def _packed_ip(host: str) -> bytes:
    """``_pack_ip`` for encoding: hosts repeat (one store host, few producers)."""
    return _pack_ip(host)


def _unpack_ip(raw: bytes) -> str:
    return socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, raw)


@functools.lru_cache(maxsize=1024)
def _host_port(raw: bytes, port: int) -> HostPort:
    """Hosts repeat across the records of a body (one store host, few producers)."""
    return HostPort(_unpack_ip(raw), port)


@dataclasses.dataclass(slots=True)
class Message:
    """One stored record (Java ``MessageExt``). ``body`` is kept as stored (maybe compressed)."""

    topic: str
    body: bytes = b""
    properties: dict[str, str] = dataclasses.field(default_factory=dict)
    queue_id: int = 0
    flag: int = 0
    queue_offset: int = 0
    physical_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: HostPort = _NO_HOST
    store_timestamp: int = 0
    store_host: HostPort = _NO_HOST
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    body_crc: int | None = None
    magic: int = MAGIC_V1
    store_size: int = 0

    @property
    def tags(self) -> str | None:
        return self.properties.get("TAGS")

    @property
    def keys(self) -> str | None:
        return self.properties.get("KEYS")

    @property
    def offset_msg_id(self) -> str:
        """Offset message id from STOREHOST and PHYSICALOFFSET (what send responses return)."""
        return create_offset_msg_id(self.store_host, self.physical_offset)

    @property
    def msg_id(self) -> str:
        """User-visible id: ``UNIQ_KEY``, else the offset id (Java ``MessageClientExt.getMsgId``)."""
        return self.properties.get("UNIQ_KEY") or self.offset_msg_id


@dataclasses.dataclass(slots=True)
class BatchItem:
    """One message of a SEND_BATCH_MESSAGE body (Java ``Message``: flag, body, properties)."""

    body: bytes
    properties: dict[str, str] = dataclasses.field(default_factory=dict)
    flag: int = 0


# --- properties -----------------------------------------------------------------------------


def properties_to_string(properties: Mapping[str, str]) -> str:
    """Java ``messageProperties2String`` (≥ 4.9.1): ``k\\x01v`` pairs joined by ``\\x02``."""
    return "\x02".join([f"{k}\x01{v}" for k, v in properties.items()])


def string_to_properties(text: str) -> dict[str, str]:
    """Java ``string2messageProperties``: a pair needs a non-empty name and value (the name ends
    at its first ``\\x01``); malformed pairs are skipped, a trailing separator is fine and a
    later duplicate wins. One regex pass, tested against a transcription of the Java loop."""
    return dict(_PAIR.findall(text))


def _decode_properties(raw: bytes, where: int) -> dict[str, str]:
    try:
        return string_to_properties(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise MessageError(f"properties are not UTF-8: {exc.reason}", where=where) from None


def _encode_properties(properties: Mapping[str, str]) -> bytes:
    raw = properties_to_string(properties).encode("utf-8", "surrogatepass")
    if len(raw) > MAX_PROPERTIES_BYTES:
        raise MessageError(f"properties of {len(raw)} bytes exceed {MAX_PROPERTIES_BYTES}")
    return raw


# --- stored records -------------------------------------------------------------------------

_HEAD = struct.Struct(">iIiiiqqiq")  # total .. born_timestamp: 48 bytes
# born host .. body length, by (sys_flag >> 4) & 3: which of the two hosts are IPv6
_LAYOUTS = [struct.Struct(f">{b}siq{s}siiqi") for s in (4, 16) for b in (4, 16)]
# TOTALSIZE .. body length in one pack, for encoding, indexed the same way
_FIXED = [struct.Struct(f">iIiiiqqiq{b}siq{s}siiqi") for s in (4, 16) for b in (4, 16)]
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_I64 = struct.Struct(">q")

#: Where fixed fields of a stored record start (both magics): what readers of raw records use.
PHYSICAL_OFFSET_AT = 28
SYSFLAG_AT = 36
BORN_HOST_AT = 48
STORE_TIMESTAMP_END_V6 = BORN_HOST_AT + 20 + 8  # a record shorter than this may not have it yet


def record_store_timestamp(buffer: Any, at: int) -> int:
    """STORETIMESTAMP of the record at ``at`` in ``buffer``, without decoding the rest."""
    (sys_flag,) = _I32.unpack_from(buffer, at + SYSFLAG_AT)
    born_host_size = 20 if sys_flag & BORNHOST_V6_FLAG else 8
    return _I64.unpack_from(buffer, at + BORN_HOST_AT + born_host_size)[0]


def record_count(records: bytes) -> int:
    """How many stored records lie back to back in ``records`` (walks TOTALSIZE; no decoding)."""
    count = pos = 0
    while pos + 4 <= len(records):
        size = _I32.unpack_from(records, pos)[0]
        if size <= 0:
            break
        pos += size
        count += 1
    return count
_U16 = struct.Struct(">H")


def body_crc(body: bytes) -> int:
    """BODYCRC as the store writes it: zlib crc32 masked to a non-negative int32."""
    return crc32(body) & 0x7FFFFFFF


def decode_message(data: bytes, offset: int = 0, *, check_crc: bool = False) -> tuple[Message, int]:
    """Decode the record at ``offset``; return it and the offset just past it."""
    end = len(data)
    if end - offset < 48:
        raise MessageError(f"record header needs 48 bytes, {end - offset} left", where=offset)
    (total, magic, crc, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts) = _HEAD.unpack_from(
        data, offset
    )
    if magic != MAGIC_V1 and magic != MAGIC_V2:
        raise MessageError(f"unknown magic code {magic:#010x}", where=offset + 4)
    rec_end = offset + total
    if total < 48 or rec_end > end:
        raise MessageError(f"record size {total} does not fit the {end - offset} bytes left", where=offset)
    layout = _LAYOUTS[(sys_flag >> 4) & 3]
    if total < 48 + layout.size + 3 + (magic == MAGIC_V2):
        raise MessageError(f"record size {total} is less than its fixed fields", where=offset)
    born_ip, born_port, store_ts, store_ip, store_port, reconsume, prepared, body_len = layout.unpack_from(
        data, offset + 48
    )
    pos = offset + 48 + layout.size
    if body_len < 0 or pos + body_len > rec_end:
        raise MessageError(f"body length {body_len} overruns the record", where=pos - 4)
    body = bytes(data[pos : pos + body_len])
    pos += body_len
    if magic == MAGIC_V1:
        if pos + 1 > rec_end:
            raise MessageError("topic length overruns the record", where=pos)
        topic_len = data[pos]
        if topic_len > 127:
            raise MessageError(f"v1 topic length {topic_len - 256} is negative", where=pos)
        pos += 1
    else:
        if pos + 2 > rec_end:
            raise MessageError("topic length overruns the record", where=pos)
        (topic_len,) = _I16.unpack_from(data, pos)
        if topic_len < 0:
            raise MessageError(f"v2 topic length {topic_len} is negative", where=pos)
        pos += 2
    if pos + topic_len + 2 > rec_end:
        raise MessageError(f"topic length {topic_len} overruns the record", where=pos)
    try:
        topic = data[pos : pos + topic_len].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MessageError(f"topic is not UTF-8: {exc.reason}", where=pos) from None
    pos += topic_len
    (props_len,) = _I16.unpack_from(data, pos)
    pos += 2
    if props_len < 0 or pos + props_len != rec_end:
        raise MessageError(
            f"properties length {props_len} but {rec_end - pos} bytes remain in the record", where=pos - 2
        )
    properties = _decode_properties(bytes(data[pos:rec_end]), pos) if props_len else {}
    if check_crc and body_crc(body) != crc:
        raise MessageError(f"body CRC {crc} does not match computed {body_crc(body)}", where=offset + 8)
    msg = Message(
        topic,
        body,
        properties,
        queue_id,
        flag,
        queue_offset,
        physical_offset,
        sys_flag,
        born_ts,
        _host_port(born_ip, born_port),
        store_ts,
        _host_port(store_ip, store_port),
        reconsume,
        prepared,
        crc,
        magic,
        total,
    )
    return msg, rec_end


def decode_messages(data: bytes, *, check_crc: bool = False) -> list[Message]:
    """Every record of a pull/view/query body; the body must end exactly at a record boundary."""
    messages = []
    offset = 0
    end = len(data)
    while offset < end:
        msg, offset = decode_message(data, offset, check_crc=check_crc)
        messages.append(msg)
    return messages


def encode_message(msg: Message) -> bytes:
    """One stored record. Sets the V6 bits from the hosts and computes CRC and sizes."""
    born_ip = _packed_ip(msg.born_host.host)
    store_ip = _packed_ip(msg.store_host.host)
    sys_flag = msg.sys_flag & ~(BORNHOST_V6_FLAG | STOREHOST_V6_FLAG)
    if len(born_ip) == 16:
        sys_flag |= BORNHOST_V6_FLAG
    if len(store_ip) == 16:
        sys_flag |= STOREHOST_V6_FLAG
    topic_field = _topic_field(msg.topic, msg.magic)
    props = _encode_properties(msg.properties) if msg.properties else b""
    body = msg.body
    crc = crc32(body) & 0x7FFFFFFF if msg.body_crc is None else msg.body_crc
    fixed = _FIXED[(sys_flag >> 4) & 3]
    total = fixed.size + len(body) + len(topic_field) + 2 + len(props)
    try:
        head = fixed.pack(
            total, msg.magic, crc, msg.queue_id, msg.flag, msg.queue_offset, msg.physical_offset, sys_flag,
            msg.born_timestamp, born_ip, msg.born_host.port, msg.store_timestamp, store_ip, msg.store_host.port,
            msg.reconsume_times, msg.prepared_transaction_offset, len(body),
        )  # fmt: skip
    except struct.error as exc:
        raise MessageError(f"message field out of range: {exc}") from None
    return b"".join((head, body, topic_field, _I16.pack(len(props)), props))


@functools.lru_cache(maxsize=4096)
def _topic_field(topic: str, magic: int) -> bytes:
    """The TOPIC field with its length prefix (topics repeat, so this is cached)."""
    raw = topic.encode("utf-8", "surrogatepass")
    if magic == MAGIC_V1:
        if len(raw) > MAX_TOPIC_BYTES_V1:
            raise MessageError(f"topic of {len(raw)} bytes needs a v2 record (v1 allows 127)")
        return bytes((len(raw),)) + raw
    if magic == MAGIC_V2:
        if len(raw) > 32767:
            raise MessageError(f"topic of {len(raw)} bytes exceeds the v2 limit")
        return _I16.pack(len(raw)) + raw
    raise MessageError(f"unknown magic code {magic:#x}")


def decode_message_with_construct(data: bytes) -> Message:
    """Decode one record through the construct declaration (the spec of the fast path)."""
    try:
        p = _MESSAGE_COMPILED.parse(data)
    except Exception as exc:  # construct's errors and builtins alike mean malformed here
        raise MessageError(f"record does not parse: {exc}") from None
    if p.total_size != len(data):
        raise MessageError(f"record size {p.total_size} but {len(data)} bytes given")
    return Message(
        topic=p.topic,
        body=p.body,
        properties=_decode_properties(p.properties, 0),
        queue_id=p.queue_id,
        flag=p.flag,
        queue_offset=p.queue_offset,
        physical_offset=p.physical_offset,
        sys_flag=p.sys_flag,
        born_timestamp=p.born_timestamp,
        born_host=HostPort(_unpack_ip(p.born_host.ip), p.born_host.port),
        store_timestamp=p.store_timestamp,
        store_host=HostPort(_unpack_ip(p.store_host.ip), p.store_host.port),
        reconsume_times=p.reconsume_times,
        prepared_transaction_offset=p.prepared_transaction_offset,
        body_crc=p.body_crc,
        magic=p.magic,
        store_size=p.total_size,
    )


# --- batch bodies ---------------------------------------------------------------------------

_BATCH_HEAD = struct.Struct(">iiiii")  # total, magic 0, crc 0, flag, body length


def encode_batch(items: Iterable[BatchItem]) -> bytes:
    """SEND_BATCH_MESSAGE body (Java ``MessageDecoder.encodeMessages``)."""
    parts = []
    for item in items:
        props = _encode_properties(item.properties)
        total = 20 + len(item.body) + 2 + len(props)
        try:
            parts += (_BATCH_HEAD.pack(total, 0, 0, item.flag, len(item.body)), item.body, _I16.pack(len(props)), props)
        except struct.error as exc:
            raise MessageError(f"batch item field out of range: {exc}") from None
    return b"".join(parts)


def decode_batch(data: bytes) -> list[BatchItem]:
    """Items of a SEND_BATCH_MESSAGE body; each item's declared size must match its fields."""
    items = []
    pos = 0
    end = len(data)
    while pos < end:
        if end - pos < 22:
            raise MessageError(f"batch item needs at least 22 bytes, {end - pos} left", where=pos)
        total, _magic, _crc, flag, body_len = _BATCH_HEAD.unpack_from(data, pos)
        item_end = pos + total
        if total < 22 or item_end > end:
            raise MessageError(f"batch item size {total} does not fit the {end - pos} bytes left", where=pos)
        if body_len < 0 or pos + 20 + body_len + 2 > item_end:
            raise MessageError(f"batch body length {body_len} overruns the item", where=pos + 16)
        body = bytes(data[pos + 20 : pos + 20 + body_len])
        p = pos + 20 + body_len
        (props_len,) = _I16.unpack_from(data, p)
        if props_len < 0 or p + 2 + props_len != item_end:
            raise MessageError(f"batch properties length {props_len} does not end the item", where=p)
        properties = _decode_properties(bytes(data[p + 2 : item_end]), p + 2) if props_len else {}
        items.append(BatchItem(body, properties, flag))
        pos = item_end
    return items


def decode_batch_with_construct(data: bytes) -> list[BatchItem]:
    """Decode a batch body through the construct declaration (the spec of ``decode_batch``)."""
    items = []
    pos = 0
    while pos < len(data):
        try:
            p = _BATCH_ITEM_COMPILED.parse(data[pos:])
        except Exception as exc:  # construct's errors and builtins alike mean malformed here
            raise MessageError(f"batch item does not parse: {exc}", where=pos) from None
        if p.total_size != 20 + len(p.body) + 2 + len(p.properties):
            raise MessageError(f"batch item size {p.total_size} does not match its fields", where=pos)
        items.append(BatchItem(p.body, _decode_properties(p.properties, pos), p.flag))
        pos += p.total_size
    return items


# --- message ids, tags, compression ---------------------------------------------------------


_PORT_OFFSET = struct.Struct(">iq")


def create_offset_msg_id(store_host: HostPort, physical_offset: int) -> str:
    """Offset message id: store IP bytes, port int32, physical offset int64, upper-case hex."""
    try:
        return (_packed_ip(store_host.host) + _PORT_OFFSET.pack(store_host.port, physical_offset)).hex().upper()
    except struct.error as exc:
        raise MessageError(f"message id field out of range: {exc}") from None


def decode_offset_msg_id(msg_id: str) -> tuple[HostPort, int]:
    """Inverse of :func:`create_offset_msg_id`: 32 hex chars for IPv4, 56 for IPv6."""
    if len(msg_id) not in (32, 56):
        raise MessageError(f"offset message id has {len(msg_id)} characters, not 32 or 56")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise MessageError(f"offset message id is not hex: {msg_id!r}") from None
    ip_len = len(raw) - 12
    port, offset = struct.unpack_from(">iq", raw, ip_len)
    return HostPort(_unpack_ip(raw[:ip_len]), port), offset


def tag_hash(tags: str | None) -> int:
    """tagsCode of a message: Java ``String.hashCode`` of its TAGS, 0 when untagged."""
    return string_hash(tags) if tags else 0


#: Largest body we inflate: Java's default maxMessageSize is 4 MiB; 64 MiB leaves room for
#: brokers configured far above it while keeping a zip bomb from exhausting memory.
MAX_INFLATED_BYTES = 64 * 1024 * 1024


def decompress_body(body: bytes, sys_flag: int, max_bytes: int = MAX_INFLATED_BYTES) -> bytes:
    """The plain body of a message; bodies without COMPRESSED_FLAG come back as they are.
    Refuses (MessageError) to inflate past ``max_bytes``."""
    if not sys_flag & COMPRESSED_FLAG:
        return body
    kind = sys_flag & COMPRESSION_TYPE_MASK
    try:
        if kind in (0, COMPRESSION_ZLIB):
            inflater = zlib.decompressobj()
            plain = inflater.decompress(body, max_bytes)
            if inflater.unconsumed_tail:
                raise MessageError(f"compressed body inflates past {max_bytes} bytes")
            if not inflater.eof:
                raise MessageError("compressed body is truncated")
            return plain
        if kind == COMPRESSION_LZ4:
            import lz4.frame  # optional: only for LZ4 producers

            with lz4.frame.LZ4FrameDecompressor() as inflater:
                plain = inflater.decompress(body, max_length=max_bytes)
                if not inflater.eof:
                    raise MessageError(f"LZ4 body is truncated or inflates past {max_bytes} bytes")
                return plain
        if kind == COMPRESSION_ZSTD:
            import zstandard  # optional: only for ZSTD producers

            inflater = zstandard.ZstdDecompressor().decompressobj()
            plain = inflater.decompress(body)
            if len(plain) > max_bytes:
                raise MessageError(f"compressed body inflates past {max_bytes} bytes")
            return plain
    except ImportError as exc:
        raise MessageError(f"body compression {kind:#x} needs the {exc.name} package") from None
    except MessageError:
        raise
    except Exception as exc:  # each library raises its own error type for corrupt input
        raise MessageError(f"compressed body does not inflate: {exc}") from None
    raise MessageError(f"unknown compression type {kind:#x}")
