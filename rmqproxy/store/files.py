"""Small durable files: JSON written whole by atomic replace (write temp, fsync, rename, fsync dir).

A write either replaces the file with a complete new one or leaves it as it was: a short or failed
write (a full disk) raises before the rename. The version it replaces is kept as ``<name>.bak``
(a hard link, no copy), and a reader falls back to it when the file itself cannot be parsed, so
a damaged config file costs one update, not the broker's start.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from twisted.logger import Logger

log = Logger()


def backup_of(path: Path) -> Path:
    return path.with_name(path.name + ".bak")


def write_json_atomic(path: Path, value: Any) -> None:
    """Replace ``path`` with ``value`` as JSON so a crash or a full disk leaves the old or the new
    file, whole; the old one stays as ``<name>.bak``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    data = memoryview(json.dumps(value, sort_keys=True, separators=(",", ":")).encode())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
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
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


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
