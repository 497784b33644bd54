"""A full disk refuses sends with the reference's code and a clear remark, pulls keep working, and
the store takes sends again by itself once there is room, with nothing acknowledged lost (issue
24: it used to latch read-only until a restart). ``rmqproxy serve`` over a real socket, its store
on a small tmpfs that the test grows while the server runs.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from codec.codes import ResponseCode as R
from codec.headers import PullMessageResponseHeader
from codec.message import decode_messages
from tests.needs import skip_or_fail

from ..interop.server import RunningServer
from ..interop.wire import WireClient

BODY = bytes(4096)


def _mount(args: list[str]) -> None:
    proc = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        skip_or_fail(f"the disk-full test mounts a tmpfs (needs root): {proc.stderr.strip()}")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """``tmp_path/store``, a 40 MiB tmpfs."""
    if os.geteuid() != 0:
        skip_or_fail("the disk-full test mounts a tmpfs (needs root)")
    store = tmp_path / "store"
    store.mkdir()
    _mount(["-t", "tmpfs", "-o", "size=40m", "tmpfs", str(store)])
    try:
        yield store
    finally:
        subprocess.run(["umount", "-l", str(store)], check=False)


def test_a_full_disk_refuses_sends_keeps_pulls_and_recovers_without_a_restart(small_disk: Path) -> None:
    conf = {"mappedFileSizeCommitLog": str(4 << 20)}
    with RunningServer(workdir=small_disk.parent, broker_conf=conf) as server, WireClient(server.namesrv) as wire:
        acknowledged = 0
        refused = None
        while refused is None:
            answer = wire.send("Full", BODY)
            if answer.code == R.SUCCESS:
                acknowledged += 1
                assert acknowledged < 20_000, "40 MiB never filled up"
            else:
                refused = answer
        assert refused.code == R.SERVICE_NOT_AVAILABLE and "disk is full" in refused.remark, refused
        assert wire.send("Full", BODY).code == R.SERVICE_NOT_AVAILABLE  # and stays so while full

        first = wire.pull("cg", "Full", 0, 0)  # reading goes on
        assert first.code == R.SUCCESS and len(decode_messages(first.body)) > 0

        subprocess.run(["mount", "-o", "remount,size=120m", str(small_disk)], check=True)
        deadline = time.monotonic() + 15
        while (answer := wire.send("Full", BODY)).code != R.SUCCESS:
            assert time.monotonic() < deadline, f"sends still refused after the disk grew: {answer.remark}"
            time.sleep(0.2)
        acknowledged += 1
        for _ in range(50):
            assert wire.send("Full", BODY).code == R.SUCCESS
        acknowledged += 50

        server.restart()  # what was acknowledged survived, and the store starts on what it wrote
        with WireClient(server.namesrv) as again:
            offset = 0
            received = 0
            while True:
                answer = again.pull("cg", "Full", 0, offset)
                if answer.code != R.SUCCESS:
                    break
                received += len(decode_messages(answer.body))
                offset = PullMessageResponseHeader.from_ext(answer.ext_fields).next_begin_offset
        print(f"disk full: {acknowledged} sends acknowledged around a full disk, {received} read back after a restart")
        assert received == acknowledged
