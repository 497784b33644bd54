"""Issue 40 over real loopback TCP, against a real ``rmqproxy serve`` process: one connection holds
``maxHeldPulls`` pulls, and another consumer's long poll is still held for its suspend time (before
the fix it came back PULL_NOT_FOUND after about a millisecond), while the hog's newest held pull is
answered SYSTEM_BUSY saying why. The unit and harness tests (tests/hold/test_fair_share.py,
tests/security/test_limits.py) check the rule exactly on a fake clock; this one checks the wiring."""

from __future__ import annotations

import socket
import time

import pytest

from codec.codes import PullSysFlag
from codec.codes import RequestCode as C
from codec.codes import ResponseCode as R
from codec.command import RemotingCommand
from codec.headers import REQUEST_HEADERS
from codec.peer import ANSWER, RemotingPeer
from tests.interop.server import RunningServer, serve_available
from tests.interop.wire import WireClient

MAX_HELD = 50
SUSPEND_MS = 1000


def _pull(group: str, suspend_ms: int) -> RemotingCommand:
    codec = REQUEST_HEADERS[C.PULL_MESSAGE]
    header = codec.cls(consumer_group=group, topic="FairT", queue_id=0, queue_offset=1, max_msg_nums=32,
                       sys_flag=int(PullSysFlag.SUSPEND), commit_offset=0, suspend_timeout_millis=suspend_ms,
                       sub_version=0)  # fmt: skip
    return RemotingCommand(code=C.PULL_MESSAGE, ext_fields=codec.encode(header))


class Hog:
    """One raw connection that pipelines its pulls and collects every answer by opaque."""

    def __init__(self, addr: str) -> None:
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.peer = RemotingPeer()
        self.answers: dict[int, RemotingCommand] = {}

    def send(self, command: RemotingCommand) -> int:
        opaque, data = self.peer.request(command)
        self.sock.sendall(data)
        return opaque

    def wait_for(self, opaque: int) -> RemotingCommand:
        while opaque not in self.answers:
            chunk = self.sock.recv(65536)
            assert chunk, "server closed the connection"
            for incoming in self.peer.receive(chunk):
                if incoming.kind is ANSWER:
                    self.answers[incoming.outstanding.opaque] = incoming.command
        return self.answers[opaque]


@pytest.mark.skipif(not serve_available(), reason="rmqproxy serve is not installed in this Python")
def test_a_hog_holding_max_held_pulls_does_not_cut_another_consumers_long_poll_short(tmp_path) -> None:
    with RunningServer(workdir=tmp_path / "server", broker_conf={"maxHeldPulls": str(MAX_HELD)}) as server:
        with WireClient(server.broker_addr) as setup:
            assert setup.create_topic("FairT", 1).code == R.SUCCESS
            assert setup.send("FairT", b"x").code == R.SUCCESS  # offset 0 taken: a pull of offset 1 is held
        hog = Hog(server.broker_addr)
        try:
            held = [hog.send(_pull("hogG", 15_000)) for _ in range(MAX_HELD)]
            # requests of a connection are served in order: once this is answered, every pull is held
            hog.wait_for(hog.send(RemotingCommand(code=C.GET_BROKER_RUNTIME_INFO)))
            assert not set(held) & set(hog.answers)
            with WireClient(server.broker_addr, timeout=10) as normal:
                started = time.monotonic()
                answer = normal.call(C.PULL_MESSAGE, consumer_group="normalG", topic="FairT", queue_id=0,
                                     queue_offset=1, max_msg_nums=32, sys_flag=int(PullSysFlag.SUSPEND),
                                     commit_offset=0, suspend_timeout_millis=SUSPEND_MS, sub_version=0)  # fmt: skip
                waited = time.monotonic() - started
            assert answer.code == R.PULL_NOT_FOUND
            assert waited >= SUSPEND_MS / 1000 * 0.95, f"answered after {waited * 1000:.1f} ms, not held"
            busy = hog.wait_for(held[-1])
            assert busy.code == R.SYSTEM_BUSY
            assert f"maxHeldPulls {MAX_HELD}" in busy.remark and "fair share" in busy.remark
            assert not set(held[:-1]) & set(hog.answers)  # the others still held
        finally:
            hog.sock.close()
