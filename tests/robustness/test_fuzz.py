"""A bounded live fuzz (issue 24): 100,000 hostile frames (``hostile.py``) against ``rmqproxy
serve`` over real sockets, while a well-behaved client keeps checking that it gets correct answers.
The server must survive, stay within an RSS bound, keep every answer of the checker right, and
create nothing outside its store. ``bench/soak.py`` runs the same flood longer, with kills.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from codec.codes import RequestCode as C
from codec.codes import ResponseCode as R
from codec.message import decode_messages

from ..interop.server import RunningServer
from ..interop.wire import WireClient
from .hostile import flood

FRAMES = int(os.environ.get("RMQ_FUZZ_FRAMES", "100000"))
SEED = int(os.environ.get("RMQ_FUZZ_SEED", "24"))
RSS_BOUND = 64 << 20


class Checker:
    """A well-behaved client: a route lookup, a send and the pull of what it sent, each checked."""

    def __init__(self, wire: WireClient) -> None:
        self.wire = wire
        self.checks = 0
        self.wrong: list[str] = []
        self.offset = 0

    def __call__(self, _sent: int = 0) -> None:
        self.checks += 1
        route = self.wire.call(C.GET_ROUTEINFO_BY_TOPIC, topic="TBW102")
        if route.code != R.SUCCESS:
            self.wrong.append(f"route: {route.code} {route.remark}")
        body = f"check {self.checks}".encode()
        sent = self.wire.send("CheckT", body, group="checker")
        if sent.code != R.SUCCESS or int(sent.ext_fields["queueOffset"]) != self.offset:
            self.wrong.append(f"send: {sent.code} {sent.remark} {sent.ext_fields}")
            return
        pulled = self.wire.pull("checker", "CheckT", 0, self.offset, max_nums=1)
        if pulled.code != R.SUCCESS or [m.body for m in decode_messages(pulled.body)] != [body]:
            self.wrong.append(f"pull at {self.offset}: {pulled.code} {pulled.remark}")
        self.offset += 1


@pytest.fixture(scope="module")
def server() -> Iterator[RunningServer]:
    with RunningServer() as running:
        yield running


def test_hostile_frames_neither_crash_the_server_nor_disturb_a_good_client(server: RunningServer) -> None:
    host, port = server.namesrv.rsplit(":", 1)
    with WireClient(server.namesrv) as wire:
        checker = Checker(wire)
        checker()
        baseline = server.rss
        peak = baseline

        def between(sent: int) -> None:
            nonlocal peak
            if sent % 1000 == 0:
                checker()
                peak = max(peak, server.rss)

        sent = flood((host, int(port)), FRAMES, SEED, between=between)
        checker()
    assert server.alive(), server.log_tail()
    assert not checker.wrong, checker.wrong[:10]
    print(f"fuzz: {sent} hostile frames, {checker.checks} checks all right, RSS {baseline >> 20} -> "
          f"peak {peak >> 20} MiB")
    assert peak - baseline <= RSS_BOUND
    workdir = server.store_dir.parent
    assert {p.name for p in workdir.iterdir()} <= {"store", "server.log", "broker.conf"}
    assert not [p for p in server.store_dir.rglob("*") if ".." in p.name]
    log = server.log_path.read_text(errors="replace")
    trouble = ("Traceback", "crashed", "Unhandled", "handler failed")
    assert not any(word in log for word in trouble), log[log.find("Traceback") - 2000:][:6000]
