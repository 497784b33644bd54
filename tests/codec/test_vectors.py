"""Every frame of a real Java 4.9.7 client session with an Apache broker decodes completely and
re-encodes to the same bytes (tests/vectors/README.md)."""

from __future__ import annotations

import collections
import dataclasses
import json

import pytest

from codec import frame as framing  # its hot names: codec.implementation rebinds them
from codec import message as codec_message  # likewise
from codec.bodies import (
    GetConsumerListByGroupResponseBody,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    TopicRouteData,
    UnlockBatchRequestBody,
)
from codec.codes import RequestCode, ResponseCode
from codec.command import RemotingCommand
from codec.headers import REQUEST_HEADERS, RESPONSE_HEADERS
from codec.message import (
    MESSAGE,
    create_offset_msg_id,
    decode_batch,
    decode_message,
    decode_messages,
    decode_offset_msg_id,
    decompress_body,
    encode_batch,
)

from ..conftest import find_session_vectors

REQUEST_BODIES = {
    RequestCode.HEART_BEAT: HeartbeatData,
    RequestCode.LOCK_BATCH_MQ: LockBatchRequestBody,
    RequestCode.UNLOCK_BATCH_MQ: UnlockBatchRequestBody,
}
RESPONSE_BODIES = {
    RequestCode.GET_ROUTEINFO_BY_TOPIC: TopicRouteData,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: GetConsumerListByGroupResponseBody,
    RequestCode.LOCK_BATCH_MQ: LockBatchResponseBody,
}


def _records() -> list[dict]:
    return [json.loads(line) for line in find_session_vectors().read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def sessions() -> dict[str, list[tuple[dict, bytes, RemotingCommand]]]:
    """The decoded session of each codec implementation, decoded once per module."""
    return {}


@pytest.fixture
def session(sessions: dict, codec_implementation: str) -> list[tuple[dict, bytes, RemotingCommand]]:
    """The recorded session as decoded by the implementation this test runs on."""
    if codec_implementation not in sessions:
        sessions[codec_implementation] = _decoded_session()
    return sessions[codec_implementation]


def _decoded_session() -> list[tuple[dict, bytes, RemotingCommand]]:
    out = []
    for rec in _records():
        frame = bytes.fromhex(rec["frame_hex"])
        (payload,) = framing.FrameDecoder().feed(frame)
        out.append((rec, frame, RemotingCommand.decode(payload)))
    return out


def test_the_session_has_what_its_readme_describes(session: list) -> None:
    codes = collections.Counter((r["dir"], c.code) for r, _, c in session if not c.is_response)
    assert codes[("c2s", RequestCode.PULL_MESSAGE)] == 36
    assert codes[("c2s", RequestCode.UPDATE_CONSUMER_OFFSET)] == 52
    assert codes[("s2c", RequestCode.NOTIFY_CONSUMER_IDS_CHANGED)] == 3
    assert sum(1 for r, _, c in session if c.is_response and c.code == ResponseCode.PULL_NOT_FOUND) == 8


def test_every_frame_reencodes_to_the_same_bytes(session: list) -> None:
    for rec, frame, cmd in session:
        assert (cmd.code, cmd.flag, cmd.opaque) == (rec["code"], rec["flag"], rec["opaque"])
        assert cmd.encode() == frame, rec


def test_every_request_header_decodes_and_reencodes(session: list) -> None:
    decoded = 0
    for rec, _, cmd in session:
        if cmd.is_response or cmd.code not in REQUEST_HEADERS:
            continue
        codec = REQUEST_HEADERS[cmd.code]
        header = codec.decode(cmd.ext_fields)
        ext = cmd.ext_fields or {}
        # Keys outside the header class (the lite pull client's ReqT) are ignored, like Java does.
        known = {f.wire for f in codec.fields}
        assert codec.encode(header) == {k: v for k, v in ext.items() if k in known}, rec
        decoded += 1
    assert decoded > 150


def _answers(session: list) -> list[tuple[RemotingCommand, RemotingCommand]]:
    requests = {}
    pairs = []
    for rec, _, cmd in session:
        key = (rec["conn"], cmd.opaque)
        if cmd.is_response:
            pairs.append((requests.pop(key), cmd))
        elif not cmd.is_oneway:
            requests[key] = cmd
    # Pulls still held by the broker when the clients shut down are never answered.
    assert {c.code for c in requests.values()} <= {RequestCode.PULL_MESSAGE}
    return pairs


def test_every_success_response_header_decodes(session: list) -> None:
    for request, response in _answers(session):
        codec = RESPONSE_HEADERS.get(request.code)
        if codec is not None and response.code in (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND):
            header = codec.decode(response.ext_fields)
            assert codec.decode(codec.encode(header, None)) == header


def test_json_bodies_decode_and_reencode_byte_exact(session: list) -> None:
    seen = collections.Counter()
    for request, response in _answers(session):
        for cmd, table in ((request, REQUEST_BODIES), (response, RESPONSE_BODIES)):
            cls = table.get(request.code)
            if cls is None or not cmd.body:
                continue
            value = cls.from_json(cmd.body)
            standard = cls is TopicRouteData and request.version >= 401  # the broker's choice
            assert value.to_json(standard=standard) == cmd.body, cmd
            seen[cls.__name__] += 1
    assert set(seen) == {
        "HeartbeatData", "LockBatchRequestBody", "UnlockBatchRequestBody", "TopicRouteData",
        "GetConsumerListByGroupResponseBody", "LockBatchResponseBody",
    }  # fmt: skip


def test_every_message_in_every_pull_answer_decodes(session: list) -> None:
    total = 0
    compressed = set()
    duplicated = 0
    for request, response in _answers(session):
        if request.code != RequestCode.PULL_MESSAGE or response.code != ResponseCode.SUCCESS:
            continue
        assert response.body, "a SUCCESS pull answer always carries messages"
        messages = decode_messages(response.body, check_crc=True)
        pos = 0
        for msg in messages:
            raw = response.body[pos : pos + msg.store_size]
            pos += msg.store_size
            if codec_message.encode_message(msg) != raw:
                # The 4.9.7 broker appends the batch-level properties to each batch item, so
                # those records carry WAIT twice; a later duplicate wins, and only then do the
                # bytes differ from ours.
                names = [p.split("\x01")[0] for p in MESSAGE.parse(raw).properties.decode().split("\x02")]
                again = dataclasses.replace(decode_message(codec_message.encode_message(msg))[0], store_size=msg.store_size)
                assert len(names) > len(set(names)) and again == msg, msg
                duplicated += 1
            assert msg.topic == request.ext_fields["topic"] or msg.topic.startswith("%RETRY%")
            assert len(msg.offset_msg_id) == 32 and msg.msg_id
            body = decompress_body(msg.body, msg.sys_flag)
            if body != msg.body:
                assert msg.sys_flag & 0x1 and len(body) == 5000
                compressed.add(msg.msg_id)
        total += len(messages)
    assert total >= 10 and len(compressed) == 1  # the 5,000-byte body the client compressed
    assert duplicated >= 3  # the three items of the one batch, as each group pulls them


def test_batch_body_items_decode_with_their_own_properties(session: list) -> None:
    batches = [c for _, _, c in session if c.code == RequestCode.SEND_BATCH_MESSAGE and not c.is_response]
    assert len(batches) == 1
    items = decode_batch(batches[0].body)
    assert [i.body for i in items] == [b"batch-0", b"batch-1", b"batch-2"]
    assert [i.properties["KEYS"] for i in items] == ["b0", "b1", "b2"]
    assert encode_batch(items) == batches[0].body


def test_send_responses_carry_offset_ids_consumers_can_recompute(session: list) -> None:
    for request, response in _answers(session):
        if request.code == RequestCode.SEND_MESSAGE_V2 and response.code == ResponseCode.SUCCESS:
            header = RESPONSE_HEADERS[request.code].decode(response.ext_fields)
            assert len(header.msg_id) == 32 and header.queue_offset >= 0
            assert response.ext_fields["MSG_REGION"] == "DefaultRegion"
            host, offset = decode_offset_msg_id(header.msg_id)
            assert create_offset_msg_id(host, offset) == header.msg_id
