"""FrameDecoder: whole, byte by byte, with trailing bytes, and the cap checked before buffering."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codec import frame as framing  # its hot names: codec.implementation rebinds them
from codec.errors import CodecError, FrameError
from codec.frame import encode_frame, frame_prefix

from .golden import FRAME_A, FRAME_B


def test_whole_buffer_yields_each_frame_payload() -> None:
    frames = framing.FrameDecoder().feed(FRAME_A + FRAME_B)
    assert frames == [FRAME_A[4:], FRAME_B[4:]]


def test_byte_by_byte_yields_the_same_frames() -> None:
    decoder = framing.FrameDecoder()
    out = []
    for i in range(len(FRAME_A + FRAME_B)):
        out += decoder.feed((FRAME_A + FRAME_B)[i : i + 1])
    assert out == [FRAME_A[4:], FRAME_B[4:]]
    assert decoder.buffered_bytes == 0


def test_trailing_partial_frame_is_kept_for_the_next_chunk() -> None:
    decoder = framing.FrameDecoder()
    assert decoder.feed(FRAME_A + FRAME_B[:10]) == [FRAME_A[4:]]
    assert decoder.buffered_bytes == 10
    assert decoder.feed(FRAME_B[10:]) == [FRAME_B[4:]]


def test_oversized_length_is_refused_from_the_prefix_alone() -> None:
    decoder = framing.FrameDecoder(max_frame_bytes=1024)
    with pytest.raises(FrameError) as info:
        decoder.feed(struct.pack(">i", 1021))  # 1021 + 4 > 1024
    assert info.value.close_connection
    assert decoder.buffered_bytes == 0


def test_largest_frame_java_accepts_is_accepted() -> None:
    decoder = framing.FrameDecoder(max_frame_bytes=64)
    payload = struct.pack(">i", 4) + b"{}".ljust(56, b" ")
    assert decoder.feed(struct.pack(">i", 60) + payload) == [payload]


def test_default_cap_is_javas_16_mib_including_the_prefix() -> None:
    decoder = framing.FrameDecoder()
    assert decoder.feed(struct.pack(">i", 16 * 1024 * 1024 - 4)) == []
    with pytest.raises(FrameError):
        framing.FrameDecoder().feed(struct.pack(">i", 16 * 1024 * 1024 - 3))


@pytest.mark.parametrize("length", [-1, 0, 3, -(2**31)])
def test_impossible_lengths_are_frame_errors(length: int) -> None:
    with pytest.raises(FrameError):
        framing.FrameDecoder().feed(struct.pack(">i", length))


def test_decoder_stays_failed_after_an_error() -> None:
    decoder = framing.FrameDecoder(max_frame_bytes=100)
    with pytest.raises(FrameError):
        decoder.feed(struct.pack(">i", 1000))
    with pytest.raises(FrameError):
        decoder.feed(FRAME_A)


def test_encode_frame_writes_type_and_header_length() -> None:
    frame = encode_frame(1, b"hdr", b"body")
    assert frame == struct.pack(">ii", 11, (1 << 24) | 3) + b"hdrbody"


def test_frame_prefix_counts_the_body_it_does_not_carry() -> None:
    assert frame_prefix(1, 3, 4) == encode_frame(1, b"hdr", b"body")[:8]
    with pytest.raises(FrameError):
        frame_prefix(0, 1 << 24, 0)  # the header length has 24 bits


@given(st.binary(max_size=2000), st.integers(min_value=1, max_value=64))
def test_arbitrary_bytes_raise_only_codec_errors(data: bytes, chunk: int) -> None:
    decoder = framing.FrameDecoder(max_frame_bytes=4096)
    try:
        for i in range(0, len(data), chunk):
            for frame in decoder.feed(data[i : i + chunk]):
                assert 4 <= len(frame) <= 4092
    except CodecError:
        pass
    assert decoder.buffered_bytes <= 4096 + chunk


@given(st.lists(st.binary(min_size=4, max_size=300), max_size=8), st.integers(min_value=1, max_value=50))
def test_any_chunking_gives_back_the_frames(payloads: list[bytes], chunk: int) -> None:
    stream = b"".join(struct.pack(">i", len(p)) + p for p in payloads)
    decoder = framing.FrameDecoder()
    out = []
    for i in range(0, len(stream), chunk):
        out += decoder.feed(stream[i : i + chunk])
    assert out == payloads
