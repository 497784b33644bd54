"""The sans-IO remoting peer: numbering, matching by opaque, one-way, strays, deadlines."""

from __future__ import annotations

import pytest

from codec.codes import FLAG_ONEWAY
from codec.command import RemotingCommand
from codec.errors import CodecError
from codec.peer import ANSWER, REQUEST, STRAY, RemotingPeer


def _answer(data: bytes, code: int = 0) -> bytes:
    """What the other end would send back for the request in ``data``."""
    (frame,) = RemotingPeer().feed(data)
    return RemotingCommand.decode(frame).response(code).encode()


def test_requests_are_numbered_and_answers_matched_out_of_order() -> None:
    peer = RemotingPeer()
    first, data1 = peer.request(RemotingCommand(code=11), context="pull")
    second, data2 = peer.request(RemotingCommand(code=34), context="heartbeat")
    assert (first, second) == (1, 2)
    incoming = peer.receive(_answer(data2) + _answer(data1, 19))
    assert [(i.kind, i.command.opaque, i.outstanding.context) for i in incoming] == [
        (ANSWER, 2, "heartbeat"), (ANSWER, 1, "pull")
    ]  # fmt: skip
    assert peer.outstanding() == []


def test_an_answer_nobody_waits_for_is_a_stray() -> None:
    peer = RemotingPeer()
    _, data = peer.request(RemotingCommand(code=11), deadline=5.0)
    assert [o.opaque for o in peer.expire(5.0)] == [1]
    (late,) = peer.receive(_answer(data))
    assert late.kind == STRAY and late.outstanding is None


def test_one_way_requests_are_numbered_but_never_awaited() -> None:
    peer = RemotingPeer()
    opaque, data = peer.request(RemotingCommand(code=40, flag=FLAG_ONEWAY))
    assert opaque == 1 and RemotingCommand.decode(peer.feed(data)[0]).flag & FLAG_ONEWAY
    assert peer.outstanding() == []


def test_requests_of_the_other_end_come_out_as_requests_across_split_reads() -> None:
    peer = RemotingPeer()
    data = RemotingCommand(code=310, opaque=77, body=b"x" * 100).encode()
    assert peer.receive(data[:50]) == []
    (incoming,) = peer.receive(data[50:])
    assert incoming.kind == REQUEST and incoming.command.opaque == 77


def test_only_due_requests_expire_and_close_hands_back_the_rest() -> None:
    peer = RemotingPeer()
    peer.request(RemotingCommand(code=307), deadline=10.0, context="a")
    peer.request(RemotingCommand(code=307), deadline=20.0, context="b")
    peer.request(RemotingCommand(code=307), context="c")
    assert [o.context for o in peer.expire(15.0)] == ["a"]
    assert sorted(o.context for o in peer.close()) == ["b", "c"] and peer.outstanding() == []


def test_an_undecodable_stream_raises_for_the_caller_to_close() -> None:
    with pytest.raises(CodecError):
        RemotingPeer(max_frame_bytes=1024).feed(b"\x7f\xff\xff\xff")


def test_a_tracked_opaque_is_awaited_and_skipped_by_our_own_numbering() -> None:
    peer = RemotingPeer(first_opaque=7)
    assert peer.track(7, 11, deadline=5.0, context="relayed")
    assert not peer.track(7, 11)  # taken: nothing changes
    opaque, _ = peer.request(RemotingCommand(code=10))
    assert opaque == 8
    assert peer.awaited(7).context == "relayed"
    peer.forget(7)
    assert peer.awaited(7) is None and [o.opaque for o in peer.outstanding()] == [8]


def test_our_numbering_wraps_within_32_bits() -> None:
    peer = RemotingPeer(first_opaque=2**31 - 1)
    first, _ = peer.request(RemotingCommand(code=10))
    second, data = peer.request(RemotingCommand(code=10))
    assert (first, second) == (2**31 - 1, -(2**31))
    assert RemotingCommand.decode(data[4:]).opaque == -(2**31)
