"""Bad input over a real socket to ``rmqproxy serve``: each gets its documented reaction, and the
server keeps serving everyone else (issue 6, scenario 9)."""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Iterator

import pytest

from codec.codes import RequestCode, ResponseCode
from codec.command import RemotingCommand

from ..interop.server import RunningServer
from ..interop.wire import roundtrip


@pytest.fixture(scope="module")
def server() -> Iterator[RunningServer]:
    with RunningServer() as running:
        yield running


def connect(server: RunningServer) -> socket.socket:
    host, port = server.namesrv.split(":")
    sock = socket.create_connection((host, int(port)), timeout=5)
    return sock


def closed_by_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def route(sock: socket.socket, opaque: int = 1) -> RemotingCommand:
    return roundtrip(
        sock, RemotingCommand(code=RequestCode.GET_ROUTEINFO_BY_TOPIC, opaque=opaque, ext_fields={"topic": "TBW102"})
    )


@pytest.fixture
def witness(server: RunningServer) -> Iterator[socket.socket]:
    """A well-behaved client that must be served before and after each bad one."""
    sock = connect(server)
    assert route(sock).code == ResponseCode.SUCCESS
    yield sock
    assert route(sock, 2).code == ResponseCode.SUCCESS
    sock.close()


@pytest.mark.parametrize(
    "payload",
    [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",  # garbage: 'GET ' read as a 1.1 GB length
        struct.pack(">i", 0x7FFFFFFF),  # a 2 GiB length prefix
        struct.pack(">i", -1),
        struct.pack(">i", 2),  # shorter than the header-length word
        struct.pack(">ii", 12, 100) + b"{}" * 4,  # header length beyond the frame
        struct.pack(">ii", 6, 2) + b"{]",  # header that is not JSON
        struct.pack(">ii", 14, 10) + b'{"code":"x"}',  # header property of the wrong type
        struct.pack(">ii", 6, (9 << 24) | 2) + b"{}",  # unknown serialize type
    ],
    ids=["http", "2GiB", "negative", "tiny", "header-overrun", "bad-json", "wrong-type", "serialize-type"],
)
def test_undecodable_frames_close_only_that_connection(server, witness, payload) -> None:
    bad = connect(server)
    bad.sendall(payload)
    assert closed_by_server(bad)
    bad.close()


def test_a_truncated_frame_waits_and_is_dropped_with_its_connection(server, witness) -> None:
    bad = connect(server)
    frame = RemotingCommand(code=RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": "TBW102"}).encode()
    bad.sendall(frame[:-5])
    bad.settimeout(0.3)
    with pytest.raises(TimeoutError):
        bad.recv(1)  # nothing to answer yet
    bad.close()


def test_unknown_code_is_answered_and_the_connection_kept(server, witness) -> None:
    sock = connect(server)
    answer = roundtrip(sock, RemotingCommand(code=9999, opaque=5))
    assert (answer.code, answer.remark, answer.opaque) == (
        ResponseCode.REQUEST_CODE_NOT_SUPPORTED, " request type 9999 not supported", 5
    )  # fmt: skip
    assert route(sock).code == ResponseCode.SUCCESS
    sock.close()


def test_custom_header_of_wrong_types_is_a_system_error_answer(server, witness) -> None:
    sock = connect(server)
    header = {"consumerGroup": "g", "topic": "T", "queueId": "zero", "queueOffset": "0", "maxMsgNums": "32",
              "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0", "subVersion": "0"}  # fmt: skip
    answer = roundtrip(sock, RemotingCommand(code=RequestCode.PULL_MESSAGE, opaque=3, ext_fields=header))
    assert answer.code == ResponseCode.SYSTEM_ERROR and "queueId" in answer.remark
    missing = roundtrip(sock, RemotingCommand(code=RequestCode.GET_ROUTEINFO_BY_TOPIC, opaque=4, ext_fields={}))
    assert missing.code == ResponseCode.SYSTEM_ERROR and "topic" in missing.remark
    body = roundtrip(sock, RemotingCommand(code=RequestCode.HEART_BEAT, opaque=6, body=b"{not json"))
    assert body.code == ResponseCode.SYSTEM_ERROR
    assert route(sock).code == ResponseCode.SUCCESS
    sock.close()


def test_binary_headers_are_answered_in_kind(server, witness) -> None:
    sock = connect(server)
    answer = roundtrip(sock, RemotingCommand(code=RequestCode.GET_ROUTEINFO_BY_TOPIC, opaque=8,
                                             ext_fields={"topic": "TBW102"}, serialize_type=1))  # fmt: skip
    assert answer.serialize_type == 1 and answer.code == ResponseCode.SUCCESS
    assert json.loads(answer.body)["queueDatas"][0]["perm"] == 7
    sock.close()
