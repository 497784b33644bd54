"""Many topics cannot exhaust the server's file descriptors (issue 24). Every consume queue used to
keep two fds and its mapping from start to stop, so under a 1024-fd limit 504 auto-created topics
made new topics and new clients fail, and a restart then failed too. Now at most a budget of
queue files is mapped (a quarter of the fd limit by default) and the rest reopen on use.
"""

from __future__ import annotations

import os
from pathlib import Path

from codec.codes import RequestCode as C
from codec.codes import ResponseCode as R
from codec.message import decode_messages

from ..interop.server import RunningServer
from ..interop.wire import WireClient

NOFILE = 256  # the server process's fd limit: 64 mapped queue files (128 fds) by default
TOPICS = 400  # one queue file each: 800 fds had they all stayed open
CLIENTS = 40
QUEUE_FDS = NOFILE // 2 + 2  # two per mapped file, and the flusher may be syncing one or its folder


def _queue_fds(server: RunningServer) -> int:
    """The server's fds that point at consume-queue files."""
    count = 0
    for fd in os.listdir(f"/proc/{server.pid}/fd"):
        try:
            count += "/consumequeue/" in os.readlink(f"/proc/{server.pid}/fd/{fd}")
        except OSError:
            pass
    return count


def test_many_topics_under_a_low_fd_limit_then_a_restart(tmp_path: Path) -> None:
    with RunningServer(workdir=tmp_path, nofile=NOFILE) as server:
        with WireClient(server.namesrv) as wire:
            for i in range(TOPICS):
                sent = wire.send(f"Many{i}", f"m{i}".encode())
                assert sent.code == R.SUCCESS, f"topic {i}: {sent.code} {sent.remark}"
        assert _queue_fds(server) <= QUEUE_FDS
        clients = [WireClient(server.namesrv) for _ in range(CLIENTS)]  # new clients still connect
        try:
            for client in clients:
                assert client.call(C.GET_ROUTEINFO_BY_TOPIC, topic="Many7").code == R.SUCCESS
        finally:
            for client in clients:
                client.close()

        server.restart()  # used to fail: "cannot start: [Errno 24] Too many open files"
        assert _queue_fds(server) <= QUEUE_FDS
        with WireClient(server.namesrv) as wire:
            for i in range(TOPICS):
                pulled = wire.pull("g", f"Many{i}", 0, 0)
                assert pulled.code == R.SUCCESS, f"topic {i}: {pulled.code} {pulled.remark}"
                assert [m.body for m in decode_messages(pulled.body)] == [f"m{i}".encode()]
            assert wire.send(f"Many{TOPICS}", b"one more").code == R.SUCCESS
        assert _queue_fds(server) <= QUEUE_FDS
