"""A client that pipelines pulls and stops reading cannot make the server grow (issue 24): the
server stops reading it once its replies pile up, its memory stays bounded, and every reply still
arrives, in order, once the client reads again. Against ``rmqproxy serve`` over a real socket.

Before back-pressure, 20,000 such pulls took the server from 101 MB to 2.7 GB in 7 s.
"""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from codec.codes import RequestCode as C
from codec.codes import ResponseCode as R
from codec.command import RemotingCommand
from codec.frame import FrameDecoder
from codec.headers import REQUEST_HEADERS

from rmqproxy.broker.processors.pull import SYSFLAG_SUSPEND

from ..interop.server import RunningServer
from ..interop.wire import WireClient

PULLS = 5000  # each answered with 32 messages of 4 KiB: 640 MiB of replies if all were buffered
RSS_BOUND = 64 << 20


@pytest.fixture(scope="module")
def server() -> Iterator[RunningServer]:
    with RunningServer() as running:
        yield running


def unread_by_server(server_port: int, client_port: int) -> int:
    """Bytes the server's end of this connection has received and not read (its socket's receive
    queue, from /proc/net/tcp): stays above 0 only while the server has stopped reading."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = fields[1], fields[2]
        if int(local.split(":")[1], 16) == server_port and int(remote.split(":")[1], 16) == client_port:
            return int(fields[4].split(":")[1], 16)
    raise AssertionError("the connection is not in /proc/net/tcp")


def pull_requests(count: int, topic: str = "Big", offset: int = 0) -> bytes:
    """``count`` pulls from ``offset``, each ready to be held 15 s, as one buffer of frames."""
    codec = REQUEST_HEADERS[C.PULL_MESSAGE]
    frames = []
    for opaque in range(1, count + 1):
        header = codec.cls(consumer_group="hog", topic=topic, queue_id=0, queue_offset=offset, max_msg_nums=32,
                           sys_flag=SYSFLAG_SUSPEND, commit_offset=0, suspend_timeout_millis=15000,
                           sub_version=0)  # fmt: skip
        frames.append(RemotingCommand(code=C.PULL_MESSAGE, opaque=opaque, ext_fields=codec.encode(header)).encode())
    return b"".join(frames)


def test_a_client_that_stops_reading_is_paused_and_costs_a_bounded_buffer(server: RunningServer) -> None:
    with WireClient(server.namesrv) as wire:
        for _ in range(32):
            assert wire.send("Big", bytes(4096)).code == R.SUCCESS
    baseline = server.rss
    data = memoryview(pull_requests(PULLS))  # 1.4 MB: the kernel's socket buffers take it all
    port = int(server.namesrv.rsplit(":", 1)[1])
    hog = socket.create_connection(("127.0.0.1", port))
    hog.sendall(data)
    sent = len(data)
    peak = baseline
    settle = time.monotonic() + 2.0
    while time.monotonic() < settle:  # the server handles what it read, then stops reading
        peak = max(peak, server.rss)
        time.sleep(0.05)
    unread = unread_by_server(port, hog.getsockname()[1])
    assert unread > 0, "the server read every request although no reply was read: no back-pressure"
    hog.setblocking(False)
    assert peak - baseline <= RSS_BOUND, f"RSS grew by {(peak - baseline) >> 20} MiB while the client read nothing"

    decoder = FrameDecoder()
    answered = []
    deadline = time.monotonic() + 120
    while len(answered) < PULLS:  # now read everything, and send the rest meanwhile
        assert time.monotonic() < deadline, f"{len(answered)} of {PULLS} replies, {sent} of {len(data)} bytes sent"
        writable = [hog] if sent < len(data) else []
        readable, can_write, _ = select.select([hog], writable, [], 1.0)
        if can_write:
            try:
                sent += hog.send(data[sent:])
            except BlockingIOError:
                pass
        if readable:
            chunk = hog.recv(1 << 20)
            assert chunk, "the server closed the connection"
            for payload in decoder.feed(chunk):
                command = RemotingCommand.decode(payload)
                answered.append((command.opaque, command.code, len(command.body)))
    hog.close()
    print(f"stalled reader: server RSS {baseline >> 20} MiB before, peak {peak >> 20} MiB while paused; "
          f"{unread} request bytes waiting unread in its socket; {PULLS} replies after reading")
    assert [opaque for opaque, _, _ in answered] == list(range(1, PULLS + 1))
    assert all(code == R.SUCCESS and size > 32 * 4096 for _, code, size in answered)


def read_answers(sock: socket.socket, count: int, timeout: float = 60) -> list[RemotingCommand]:
    decoder = FrameDecoder()
    answers: list[RemotingCommand] = []
    deadline = time.monotonic() + timeout
    sock.settimeout(1.0)
    while len(answers) < count:
        assert time.monotonic() < deadline, f"{len(answers)} of {count} answers"
        try:
            chunk = sock.recv(1 << 20)
        except TimeoutError:
            continue
        assert chunk, "the server closed the connection"
        answers += [RemotingCommand.decode(payload) for payload in decoder.feed(chunk)]
    return answers


HELD = 1000  # held pulls of a client that then stops reading: 1 GiB of answers once a 1 MiB message lands


def wake_held_pulls_unread(server: RunningServer, held: int = HELD) -> tuple[list[RemotingCommand], int, int]:
    """Hold ``held`` pulls of a connection that reads nothing, wake them all with one 1 MiB
    message, then read: (the answers, server RSS before the wake, its peak while unread)."""
    with WireClient(server.namesrv) as wire:
        assert wire.send("Quiet", b"x").code == R.SUCCESS  # the topic exists, its queue is at 1
    hog = socket.create_connection(("127.0.0.1", int(server.namesrv.rsplit(":", 1)[1])))
    try:
        hog.sendall(pull_requests(held, topic="Quiet", offset=1))
        time.sleep(0.5)  # the server reads and holds them all
        baseline = peak = server.rss
        with WireClient(server.namesrv) as wire:
            assert wire.send("Quiet", bytes(1 << 20)).code == R.SUCCESS  # wakes every held pull at once
        settle = time.monotonic() + 2.0
        while time.monotonic() < settle:
            peak = max(peak, server.rss)
            time.sleep(0.05)
        return read_answers(hog, held), baseline, peak
    finally:
        hog.close()


def test_held_pulls_waking_for_a_client_that_does_not_read_stop_at_the_reply_buffer_bound(
    server: RunningServer,
) -> None:
    """Answers that land later are written even to a connection the server no longer reads, so
    they are bounded by bytes: past maxBufferedReplyBytesPerConnection an answer with a body
    becomes SYSTEM_BUSY, which a consumer retries once it reads again. It once took 2 GB."""
    answers, baseline, peak = wake_held_pulls_unread(server)
    codes = [a.code for a in answers]
    print(f"held pulls waking unread: {codes.count(R.SUCCESS)} answered in full, {codes.count(R.SYSTEM_BUSY)} "
          f"SYSTEM_BUSY; server RSS {baseline >> 20} MiB before, peak {peak >> 20} MiB")
    assert sorted(a.opaque for a in answers) == list(range(1, HELD + 1))
    assert set(codes) == {R.SUCCESS, R.SYSTEM_BUSY}
    assert all("maxBufferedReplyBytesPerConnection" in a.remark for a in answers if a.code == R.SYSTEM_BUSY)
    assert peak - baseline <= RSS_BOUND, f"RSS grew by {(peak - baseline) >> 20} MiB while the client read nothing"
