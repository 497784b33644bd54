"""Clients that begin large frames and stop cannot make the server hold their bytes (issue 40):
past ``maxUnfinishedFrameBytes`` the connection with the largest unfinished frame is closed, one
whose frame gets no byte for ``frameStallTimeoutMillis`` is closed, and another client is served
meanwhile. Against ``rmqproxy serve`` over real sockets.

Before the bound, 30 connections that each sent 15 MB of a frame and stopped took the server
from 57 to 507 MB.
"""

from __future__ import annotations

import select
import socket
import struct
import time

from codec.codes import RequestCode as C
from codec.codes import ResponseCode as R

from ..interop.server import RunningServer
from ..interop.wire import WireClient

MIB = 1 << 20
STALL_S = 5.0
HOGS = 5  # each sends 3 MiB of a 4 MiB frame: 15 MiB against a 10 MiB bound


def _closed(sock: socket.socket) -> bool:
    """The server closed this connection (it never writes to it otherwise)."""
    if not select.select([sock], [], [], 0)[0]:
        return False
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_unfinished_frames_past_the_bound_or_stalled_are_closed_and_another_client_is_served() -> None:
    conf = {"maxFrameSize": str(4 * MIB), "maxUnfinishedFrameBytes": str(10 * MIB),
            "frameStallTimeoutMillis": str(int(STALL_S * 1000))}  # fmt: skip
    with RunningServer(broker_conf=conf) as server:
        port = int(server.namesrv.rsplit(":", 1)[1])
        begun = struct.pack(">i", 4 * MIB - 4) + bytes(3 * MIB - 4)
        hogs = []
        start = time.monotonic()
        for _ in range(HOGS):
            hog = socket.create_connection(("127.0.0.1", port))
            hog.sendall(begun)
            hogs.append(hog)
            time.sleep(0.2)  # the server reads it before the next begins
        try:
            deadline = time.monotonic() + 3.0
            while sum(map(_closed, hogs)) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            open_hogs = [hog for hog in hogs if not _closed(hog)]
            assert time.monotonic() - start < STALL_S, "too slow to tell the bound from the stall timeout"
            assert len(open_hogs) == HOGS - 2, "the bound closes the two largest, and only those"
            with WireClient(server.namesrv) as wire:  # served while three frames stay unfinished
                assert wire.call(C.GET_BROKER_CLUSTER_INFO).code == R.SUCCESS
                assert wire.send("Served", b"x").code == R.SUCCESS
            deadline = time.monotonic() + STALL_S + 5.0
            while not all(map(_closed, open_hogs)) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert all(map(_closed, open_hogs)), "the stalled frames' connections were not closed"
            with WireClient(server.namesrv) as wire:
                assert wire.call(C.GET_BROKER_CLUSTER_INFO).code == R.SUCCESS
        finally:
            for hog in hogs:
                hog.close()
        log = server.log_tail(1 << 20)
        assert log.count("(maxUnfinishedFrameBytes") == 2 and log.count("(frameStallTimeoutMillis)") == HOGS - 2
