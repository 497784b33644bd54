"""Small durable files: JSON written whole by atomic replace (write temp, fsync, rename, fsync dir).

A write either replaces the file with a complete new one or leaves it as it was: a short or failed
write (a full disk) raises before the rename. The version it replaces is kept as ``<name>.bak``
(a hard link, no copy), and a reader falls back to it when the file itself cannot be parsed, so
a damaged config file costs one update, not the broker's start.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from twisted.logger import Logger

log = Logger()


def backup_of(path: Path) -> Path:
    return path.with_name(path.name + ".bak")


def write_json_atomic(path: Path, value: Any) -> None:
    """Replace ``path`` with ``value`` as JSON so a crash or a full disk leaves the old or the new
    file, whole; the old one stays as ``<name>.bak``."""
    write_bytes_atomic(path, json.dumps(value, sort_keys=True, separators=(",", ":")).encode())


def write_bytes_atomic(path: Path, content: bytes, mode: int = 0o644) -> None:
    """Replace ``path`` with ``content`` as ``write_json_atomic`` does (any format, e.g. broker.conf),
    the new file with permissions ``mode``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    data = memoryview(content)
    tmp.unlink(missing_ok=True)  # a leftover would keep its own permissions
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        while data:
            data = data[os.write(fd, data):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    _keep_backup(path)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    """Make a folder's entries durable (a file created, renamed or deleted in it survives a crash)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _keep_backup(path: Path) -> None:
    """Point ``<name>.bak`` at the current file (a hard link made aside, then renamed over)."""
    staged = path.with_name(path.name + ".bak.tmp")
    try:
        staged.unlink(missing_ok=True)
        os.link(path, staged)
        os.replace(staged, backup_of(path))
    except FileNotFoundError:
        pass  # no file yet: nothing to keep


def read_json(path: Path, default: Any) -> Any:
    """The JSON in ``path``, else in its backup when ``path`` cannot be parsed, else ``default``
    when there is neither; a file that cannot be parsed and has no readable backup raises
    ValueError naming it (starting on ``default`` would silently drop what it held)."""
    backup = backup_of(path)
    try:
        return json.loads(path.read_bytes())
    except FileNotFoundError:
        if not backup.exists():
            return default
        damage = f"{path} is missing"
    except ValueError as exc:
        damage = f"{path} is not valid JSON ({exc})"
    try:
        value = json.loads(backup.read_bytes())
    except (OSError, ValueError):
        raise ValueError(f"{damage} and {backup} cannot be read either") from None
    log.warn("{damage}: using {backup}, its previous version", damage=damage, backup=backup)
    return value


class JsonWriter:
    """Keeps one JSON file up to date off the caller's thread: ``changed()`` only marks it dirty and
    wakes a writer thread, which takes ``snapshot()`` and writes it whole (changes made meanwhile
    are coalesced into one write). No fsync then runs on the thread of a request a client can
    repeat. ``close()`` writes what is pending, on the caller's thread, and stops the writer."""

    def __init__(self, path: Path, snapshot: Callable[[], Any], name: str) -> None:
        self.path = path
        self.snapshot = snapshot
        self.writes = 0
        self._wake = threading.Condition()
        self._dirty = False
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def changed(self) -> None:
        with self._wake:
            self._dirty = True
            self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._dirty and not self._closed:
                    self._wake.wait()
                if self._closed:
                    return
                self._dirty = False
            self._write()

    def _write(self) -> None:
        try:
            write_json_atomic(self.path, self.snapshot())
            self.writes += 1
        except OSError as exc:  # a full disk: the next change (or close) tries again
            with self._wake:
                self._dirty = True
            log.warn("cannot write {path}: {error}", path=self.path, error=exc)

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify()
        self._thread.join()
        write_json_atomic(self.path, self.snapshot())
