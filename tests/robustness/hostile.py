"""Hostile remoting frames, reproducible from a seed: what a broken or malicious client could send.

``hostile_frames(rng)`` yields whole frames (length prefix included) of these kinds, in turn:
random bytes; well-formed requests of the codes a client can grow state with, whose fields get
random, wrong-typed, huge, negative or path-like values; those requests mutated (bytes flipped,
cut short, extended); headers of the wrong JSON types; impossible length prefixes; batch bodies
whose lengths lie. Topic and group names come from a small pool (so the server is not asked for
thousands of real topics) that includes traversal and over-long names. Used by
``tests/robustness`` (CI) and ``bench/soak.py`` (longer).
"""

from __future__ import annotations

import json
import random
import socket
import struct
from collections.abc import Callable, Iterator

from codec.bodies import ConsumerData, HeartbeatData, LockBatchRequestBody, MessageQueue, build_subscription
from codec.codes import RequestCode as C
from codec.command import RemotingCommand
from codec.headers import REQUEST_HEADERS
from codec.message import BatchItem, encode_batch

NAMES = ["FuzzT", "FuzzU", "TBW102", "%RETRY%fuzz", "../../../../fuzz", "%DLQ%", "", "a/b", "x" * 300, "FuzzT\x00", "é"]
CODES = [C.SEND_MESSAGE, C.SEND_MESSAGE_V2, C.SEND_BATCH_MESSAGE, C.PULL_MESSAGE, C.HEART_BEAT,
         C.UPDATE_CONSUMER_OFFSET, C.QUERY_CONSUMER_OFFSET, C.CONSUMER_SEND_MSG_BACK, C.LOCK_BATCH_MQ,
         C.GET_ROUTEINFO_BY_TOPIC, C.UPDATE_AND_CREATE_TOPIC, C.GET_CONSUME_STATS, C.QUERY_MESSAGE]  # fmt: skip


def _value(rng: random.Random, kind: str, wire: str) -> str:
    if wire in ("topic", "consumerGroup", "producerGroup", "group", "defaultTopic"):
        return rng.choice(NAMES)
    choices = {
        "I": ["0", "1", "-1", "8", "2147483647", "-2147483648", "99999999999", "x", ""],
        "L": ["0", "1", "-1", "15000", "3600000", "9223372036854775807", "-9223372036854775808", "1e9", "nan"],
        "B": ["true", "false", "TRUE", "1", ""],
    }.get(kind, ["", "x" * rng.randint(1, 2000), "TagA", "*", "\u2603", "a\x01b\x02"])
    return rng.choice(choices)


def _body(rng: random.Random, code: int) -> bytes:
    if code == C.HEART_BEAT:
        consumers = [ConsumerData(rng.choice(NAMES), "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET",
                                  [build_subscription(rng.choice(NAMES), "*", 1)], False)]  # fmt: skip
        return HeartbeatData(f"fuzz@{rng.randint(0, 9)}", [], consumers).to_json()
    if code == C.LOCK_BATCH_MQ:
        mqs = [MessageQueue(rng.choice(NAMES), "rmqproxy-a", rng.randint(-2, 40)) for _ in range(rng.randint(0, 20))]
        return LockBatchRequestBody(rng.choice(NAMES), "fuzz@1", None, mqs).to_json()
    if code == C.SEND_BATCH_MESSAGE:
        return encode_batch([BatchItem(bytes(rng.randint(0, 64))) for _ in range(rng.randint(1, 4))])
    if code in (C.SEND_MESSAGE, C.SEND_MESSAGE_V2):
        return bytes(rng.randint(0, 512))
    return b""


def request(rng: random.Random, code: int | None = None, opaque: int = 1) -> bytes:
    """A well-formed frame of a client request whose field values are random (often wrong)."""
    code = code if code is not None else rng.choice(CODES)
    codec = REQUEST_HEADERS.get(code)
    ext = {}
    if codec is not None:
        for field in codec.fields:
            if field.required or rng.random() < 0.5:
                ext[field.wire] = _value(rng, field.type, field.wire)
    flag = rng.choice([0, 0, 0, 2])  # sometimes oneway
    return RemotingCommand(code=code, opaque=opaque, flag=flag, ext_fields=ext, body=_body(rng, code)).encode()


def _mutate(rng: random.Random, frame: bytes) -> bytes:
    data = bytearray(frame)
    how = rng.randrange(4)
    if how == 0 and len(data) > 4:
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(4, len(data))] = rng.randrange(256)
    elif how == 1 and len(data) > 8:
        data = data[: rng.randrange(8, len(data))]
        struct.pack_into(">i", data, 0, len(data) - 4)  # a consistent frame of a cut-short command
    elif how == 2:
        data += bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
        struct.pack_into(">i", data, 0, len(data) - 4)
    else:
        struct.pack_into(">i", data, 4, rng.choice([0, 0xFFFFFF, len(data), 0x01FFFFFF]))  # lying header length
    return bytes(data)


def _wrong_json(rng: random.Random) -> bytes:
    header = {"code": rng.choice(["x", None, [1], 10**20, -1, 11]), "opaque": rng.choice([{}, "1", 1]),
              "flag": rng.choice([0, "0", None]), "language": rng.choice(["JAVA", 7, None]),
              "version": rng.choice([409, "409", None]), "extFields": rng.choice([[1, 2], "a", {"topic": 5}, None]),
              "serializeTypeCurrentRPC": "JSON"}  # fmt: skip
    raw = json.dumps(header).encode()
    payload = struct.pack(">i", len(raw)) + raw
    return struct.pack(">i", len(payload)) + payload


def _impossible_prefix(rng: random.Random) -> bytes:
    return struct.pack(">I", rng.choice([0x7FFFFFFF, 0xFFFFFFFF, 0, 1, 3, 0x80000000])) + bytes(rng.randint(0, 16))


def hostile_frames(rng: random.Random) -> Iterator[tuple[bool, bytes]]:
    """An endless, seed-determined stream of (closes the connection, frame) (see the module doc):
    well-formed requests with bad values are answered; the other kinds may end the connection."""
    opaque = 0
    while True:
        opaque += 1
        kind = rng.randrange(6)
        if kind == 0:
            yield True, bytes(rng.randrange(256) for _ in range(rng.randint(1, 300)))
        elif kind in (1, 2):
            yield False, request(rng, opaque=opaque)
        elif kind == 3:
            yield True, _mutate(rng, request(rng, opaque=opaque))
        elif kind == 4:
            yield True, _wrong_json(rng)
        else:
            yield True, _impossible_prefix(rng)


def flood(addr: tuple[str, int], count: int, seed: int, batch: int = 50,
          between: Callable[[int], None] | None = None) -> int:
    """Send ``count`` hostile frames to ``addr``, ``batch`` per connection, the answerable ones first
    (so most are handled before one ends the connection): write them, half-close, and read until
    the server closes. ``between(sent)`` runs after each connection (a checker). Returns the number
    of frames sent."""
    stream = hostile_frames(random.Random(seed))
    sent = 0
    while sent < count:
        frames = [frame for _, frame in sorted((next(stream) for _ in range(min(batch, count - sent))),
                                               key=lambda item: item[0])]  # fmt: skip
        with socket.create_connection(addr, timeout=10) as sock:
            try:
                sock.sendall(b"".join(frames))
                sock.shutdown(socket.SHUT_WR)
                while sock.recv(1 << 16):
                    pass
            except OSError:
                pass  # the server closed first: it refused a frame
        sent += len(frames)
        if between is not None:
            between(sent)
    return sent
