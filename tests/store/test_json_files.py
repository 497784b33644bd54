"""Config files are written whole or not at all, and a damaged one falls back to its previous
version (issue 24: a short write on a full disk once replaced topics.json with half a file, and
the next start failed)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from rmqproxy.core import files
from rmqproxy.core.files import backup_of, read_json, write_json_atomic


def test_a_short_write_is_continued_until_the_file_is_whole(tmp_path: Path, monkeypatch) -> None:
    real_write = os.write

    def dribble(fd: int, data) -> int:  # a kernel may write less than asked
        return real_write(fd, bytes(data[:7]))

    monkeypatch.setattr(files.os, "write", dribble)
    value = {"topic": {"readQueueNums": 8, "writeQueueNums": 8, "perm": 6}, "pad": "x" * 100}
    write_json_atomic(tmp_path / "topics.json", value)
    monkeypatch.undo()
    assert read_json(tmp_path / "topics.json", None) == value


def test_a_full_disk_leaves_the_old_file_whole(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "topics.json"
    write_json_atomic(path, {"old": 1})
    real_write = os.write
    calls = []

    def fill_up(fd: int, data) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data[:5]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "write", fill_up)
    with pytest.raises(OSError, match="No space"):
        write_json_atomic(path, {"new": "x" * 1000})
    monkeypatch.undo()
    assert read_json(path, None) == {"old": 1}
    assert not path.with_name("topics.json.tmp").exists()


def test_a_damaged_file_is_read_from_its_previous_version(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    write_json_atomic(path, {"v": 1})
    write_json_atomic(path, {"v": 2})
    assert read_json(backup_of(path), None) == {"v": 1}
    path.write_bytes(b'{"v": 2, "trunc')  # damaged behind our back
    assert read_json(path, None) == {"v": 1}


def test_a_damaged_file_without_a_readable_backup_stops_the_start(tmp_path: Path) -> None:
    path = tmp_path / "topics.json"
    path.write_bytes(b'{"T": {"perm"')
    with pytest.raises(ValueError, match="topics.json is not valid JSON"):
        read_json(path, {})
    assert read_json(tmp_path / "absent.json", {"d": 0}) == {"d": 0}


@pytest.mark.parametrize(("error", "recovers"), [(errno.ENOSPC, True), (errno.EIO, False)])
def test_a_failed_checkpoint_write_refuses_puts_until_room_only_when_the_disk_was_full(
    tmp_path: Path, error: int, recovers: bool
) -> None:
    """A full disk makes puts wait for room (``check_disk`` gives them back); any other write error
    means the disk cannot be trusted, and puts stay refused until a restart."""
    from rmqproxy.broker.store import MessageStore, PutStatus
    from rmqproxy.broker.store.flush import FlushRound

    from .conftest import SMALL, msg

    store = MessageStore(tmp_path / "store", SMALL)
    store.start()
    try:
        assert store.put(msg()).result.ok
        store._on_flushed(FlushRound(store.commitlog.write_pos, None, OSError(error, os.strerror(error))))
        refused = store.put(msg()).result
        assert refused.status == PutStatus.SERVICE_NOT_AVAILABLE
        assert ("disk is full" in refused.remark) == recovers
        store.check_disk()  # this disk has room
        assert store.put(msg()).result.ok == recovers
    finally:
        store.shutdown()
