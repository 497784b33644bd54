"""Java behaviours the wire depends on: ``String.hashCode``, ``HashMap`` iteration order, and the
string forms ``toString``/``parseXxx`` give to header values.

Facts about OpenJDK 8-17 ``java.util.HashMap``: default capacity 16, load factor 0.75, the table
doubles when size exceeds capacity * 0.75, a key's bucket is ``(h ^ (h >>> 16)) & (capacity - 1)``
and a bucket iterates in insertion order (resizing keeps relative order). Emulating it lets us
write extFields and JSON maps in the exact order a Java peer would, so encodings stay byte-exact.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1


def string_hash(text: str) -> int:
    """Java ``String.hashCode``: ``h = 31*h + c`` over UTF-16 code units, signed 32-bit."""
    h = 0
    if text.isascii():
        for c in text.encode("ascii"):
            h = (31 * h + c) & 0xFFFFFFFF
    else:
        units = text.encode("utf-16-be", "surrogatepass")
        for i in range(0, len(units), 2):
            h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def long_hash(value: int) -> int:
    """Java ``Long.hashCode``: ``(int)(v ^ (v >>> 32))``."""
    v = value & 0xFFFFFFFFFFFFFFFF
    h = (v ^ (v >> 32)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def object_hash(value: object) -> int:
    """``hashCode`` of the values our maps and sets hold (String, Integer/Long, Boolean)."""
    if isinstance(value, str):
        return string_hash(value)
    if isinstance(value, bool):
        return 1231 if value else 1237
    if isinstance(value, int):
        return value if INT32_MIN <= value <= INT32_MAX else long_hash(value)
    return hash(value)


def hashmap_capacity(size: int, initial: int = 16) -> int:
    """Table size of a Java HashMap holding ``size`` entries that started at ``initial``."""
    capacity = initial
    while size > capacity * 3 // 4:
        capacity *= 2
    return capacity


def hash_order(items: Iterable[T], hash_of: Callable[[T], int] = object_hash, initial: int = 16) -> list[T]:
    """``items`` (in insertion order) in the order a Java ``HashMap``/``HashSet`` iterates them."""
    items = list(items)
    capacity = hashmap_capacity(len(items), initial)
    mask = capacity - 1

    def bucket(i: int) -> tuple[int, int]:
        h = hash_of(items[i]) & 0xFFFFFFFF
        return ((h ^ (h >> 16)) & mask, i)

    return [items[i] for i in sorted(range(len(items)), key=bucket)]


@functools.lru_cache(maxsize=4096)
def _key_order(keys: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(hash_order(keys, string_hash))


def hashmap_order(keys: Iterable[str]) -> tuple[str, ...]:
    """String ``keys`` (in insertion order) in Java ``HashMap`` iteration order; cached."""
    return _key_order(tuple(keys))


def java_bool(text: str) -> bool:
    """``Boolean.parseBoolean``: true only for "true", any case; never fails."""
    return text.lower() == "true"


def java_int(text: str, lo: int = INT32_MIN, hi: int = INT32_MAX) -> int:
    """``Integer.parseInt``/``Long.parseLong``: optional sign then ASCII digits, range checked."""
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body or not body.isascii() or not body.isdigit():
        raise ValueError(f"not a decimal integer: {text!r}")
    value = int(text)
    if not lo <= value <= hi:
        raise ValueError(f"{text} out of range [{lo}, {hi}]")
    return value


def java_str(value: object) -> str:
    """``String.valueOf`` for the types headers carry (booleans lower case)."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)
