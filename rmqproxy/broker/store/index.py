"""A simple key index: message keys and unique ids to physical offsets.

Entries are (crc32 of ``"topic#key"`` as uint32, physical offset int64), appended to one file per
commit-log segment (``index/<segment base>``) so retention drops them with their segment. The
owner thread buffers entries; the flusher thread appends them to the files before each checkpoint,
so recovery only re-indexes records past the checkpoint (duplicates are harmless: lookups
de-duplicate and verify every hit against the stored message).
"""

from __future__ import annotations

import functools
import os
import struct
from collections.abc import Iterable
from pathlib import Path

from codec.message import crc32

from .mapped import segment_name

ENTRY = struct.Struct(">Iq")


def key_hash(topic: str, key: str) -> int:
    return crc32(key.encode(), _topic_crc(topic))


@functools.lru_cache(maxsize=4096)
def _topic_crc(topic: str) -> int:
    """CRC of ``topic#``: a key's hash continues from it, as if the two were one string."""
    return crc32(f"{topic}#".encode())


class KeyIndex:
    def __init__(self, directory: Path, segment_size: int) -> None:
        self.directory = directory
        self.segment_size = segment_size
        directory.mkdir(parents=True, exist_ok=True)
        self.pending: dict[int, bytearray] = {}

    def add_message(self, topic: str, keys: str | None, uniq: str | None, phys: int) -> None:
        """Buffer entries for a message's KEYS (space separated) and UNIQ_KEY (owner thread)."""
        base = phys - phys % self.segment_size
        buf = self.pending.get(base)
        if buf is None:
            buf = self.pending[base] = bytearray()
        seed = _topic_crc(topic)
        if keys:
            if " " in keys:
                for key in keys.split():
                    buf += ENTRY.pack(crc32(key.encode(), seed), phys)
            else:
                buf += ENTRY.pack(crc32(keys.encode(), seed), phys)
        if uniq:
            buf += ENTRY.pack(crc32(uniq.encode(), seed), phys)

    def take_pending(self) -> dict[int, bytearray]:
        """Swap out the buffered entries (caller holds the store lock)."""
        pending, self.pending = self.pending, {}
        return pending

    def write(self, pending: dict[int, bytearray]) -> None:
        """Append buffered entries to their files and make them durable (flusher thread). Each
        file written is removed from ``pending``; a failed append (a full disk) is cut back off,
        so files only ever hold whole entries, and raises with the rest still in ``pending``."""
        for base in list(pending):
            fd = os.open(self.directory / segment_name(base), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                start = os.fstat(fd).st_size
                try:
                    view = memoryview(pending[base])
                    while view:
                        view = view[os.write(fd, view):]
                    os.fdatasync(fd)
                except OSError:
                    os.ftruncate(fd, start)
                    raise
            finally:
                os.close(fd)
            del pending[base]

    def restore(self, unwritten: dict[int, bytearray]) -> None:
        """Put entries a failed ``write`` kept back in front of those buffered since (owner thread)."""
        for base, buf in unwritten.items():
            self.pending[base] = buf + self.pending.get(base, bytearray())

    def lookup(self, topic: str, key: str) -> list[int]:
        """Physical offsets that may hold ``key`` in ``topic``, newest first, without duplicates."""
        return self.lookup_many(topic, [key]).get(key, [])

    def lookup_many(self, topic: str, keys: Iterable[str]) -> dict[str, list[int]]:
        """``lookup`` of many keys of one topic in one pass over the index (a pass reads every
        index file: callers with many keys must not make one each)."""
        wanted: dict[int, list[str]] = {}
        for key in keys:
            wanted.setdefault(key_hash(topic, key), []).append(key)
        found: dict[str, dict[int, None]] = {}
        if not wanted:
            return {}
        sources = [bytes(buf) for _, buf in sorted(self.pending.items(), reverse=True)]
        for path in sorted(self.directory.iterdir(), reverse=True):
            if path.name.isdigit():
                data = path.read_bytes()
                sources.append(data[: len(data) - len(data) % ENTRY.size])
        for data in sources:
            hits = [(h, phys) for h, phys in ENTRY.iter_unpack(data) if h in wanted]
            for h, phys in reversed(hits):
                for key in wanted[h]:
                    found.setdefault(key, {}).setdefault(phys)
        return {key: list(physs) for key, physs in found.items()}

    def drop_segment(self, base: int) -> None:
        (self.directory / segment_name(base)).unlink(missing_ok=True)
        self.pending.pop(base, None)
