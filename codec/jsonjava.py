"""Reading and writing JSON in the dialect of fastjson, which Java RocketMQ peers use for bodies.

Reading: standard JSON goes through the C ``json`` module; when that fails we parse the fastjson
extensions Java writes (docs/protocol.md: Routes, Traps): unquoted keys (``{0:"127.0.0.1:10911"}``) and
object keys (``{{"brokerName":"b","queueId":0,"topic":"T"}:{…}}``). Bare numeric keys come back
as ``int``; object keys as :class:`ObjectKey` (a hashable, ordered tuple of items).

Writing: :func:`dumps` turns nested ``dict``/``list``/scalars into compact text. Keys may be
``str``, ``int`` (unquoted unless ``quote_keys``) or ``ObjectKey``. ``ascii_only`` escapes
non-ASCII as ``\\uXXXX`` (fastjson ``BrowserCompatible``). Order is the caller's: the typed bodies
decide it the way the Java classes would.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from .errors import BodyError

MAX_DEPTH = 64


class ObjectKey(tuple):
    """A JSON object used as a map key: its (name, value) items in wire order."""

    __slots__ = ()

    def as_dict(self) -> dict[str, Any]:
        return dict(self)


def loads(data: bytes | str) -> Any:
    """Parse a body: standard JSON first, then the fastjson dialect."""
    try:
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray, memoryview)) else data
    except UnicodeDecodeError as exc:
        raise BodyError(f"JSON body is not UTF-8: {exc.reason}", where=exc.start) from None
    try:
        return json.loads(text)
    except RecursionError:
        raise BodyError("JSON body nests too deeply") from None
    except ValueError:
        pass
    return _Parser(text).parse()


_WS = re.compile(r"[ \t\n\r]*")
_BARE_KEY = re.compile(r"[A-Za-z0-9_$.\-+]+")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_decoder = json.JSONDecoder()


class _Parser:
    """Recursive descent over the fastjson dialect; every failure is a BodyError with a position."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, what: str) -> BodyError:
        return BodyError(f"JSON body: {what}", where=self.pos)

    def ws(self) -> None:
        self.pos = _WS.match(self.text, self.pos).end()  # type: ignore[union-attr]

    def parse(self) -> Any:
        value = self.value(0)
        self.ws()
        if self.pos != len(self.text):
            raise self.fail("trailing characters")
        return value

    def value(self, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise self.fail("nesting deeper than 64")
        self.ws()
        ch = self.text[self.pos : self.pos + 1]
        if ch == "{":
            return self.obj(depth)
        if ch == "[":
            return self.array(depth)
        if ch == '"':
            return self.string()
        for word, val in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return val
        m = _NUMBER.match(self.text, self.pos)
        if not m:
            raise self.fail(f"unexpected {ch!r}" if ch else "unexpected end")
        try:
            value = json.loads(m.group())
        except ValueError:  # e.g. more digits than int() converts (sys.get_int_max_str_digits)
            raise self.fail("number out of range") from None
        self.pos = m.end()
        return value

    def string(self) -> str:
        try:
            value, self.pos = _decoder.raw_decode(self.text, self.pos)
        except ValueError:
            raise self.fail("bad string") from None
        return value

    def key(self, depth: int) -> Any:
        ch = self.text[self.pos : self.pos + 1]
        if ch == '"':
            return self.string()
        if ch == "{":
            return ObjectKey(self.obj(depth).items())
        m = _BARE_KEY.match(self.text, self.pos)
        if not m:
            raise self.fail("expected an object key")
        self.pos = m.end()
        word = m.group()
        if re.fullmatch(r"-?\d{1,19}", word):
            return int(word)
        return word

    def obj(self, depth: int) -> dict:
        self.pos += 1
        result: dict = {}
        self.ws()
        if self.text.startswith("}", self.pos):
            self.pos += 1
            return result
        while True:
            self.ws()
            key = self.key(depth + 1)
            self.ws()
            if not self.text.startswith(":", self.pos):
                raise self.fail("expected ':'")
            self.pos += 1
            try:
                result[key] = self.value(depth + 1)
            except TypeError:
                raise self.fail("unhashable object key") from None
            self.ws()
            ch = self.text[self.pos : self.pos + 1]
            self.pos += 1
            if ch == "}":
                return result
            if ch != ",":
                raise self.fail("expected ',' or '}'")

    def array(self, depth: int) -> list:
        self.pos += 1
        result: list = []
        self.ws()
        if self.text.startswith("]", self.pos):
            self.pos += 1
            return result
        while True:
            result.append(self.value(depth + 1))
            self.ws()
            ch = self.text[self.pos : self.pos + 1]
            self.pos += 1
            if ch == "]":
                return result
            if ch != ",":
                raise self.fail("expected ',' or ']'")


_encode_str = json.encoder.encode_basestring  # type: ignore[attr-defined]
_encode_ascii = json.encoder.encode_basestring_ascii  # type: ignore[attr-defined]


def dumps(value: Any, *, quote_keys: bool = False, ascii_only: bool = False) -> str:
    """Compact fastjson-style text of ``value`` (see the module doc for keys and order)."""
    out: list[str] = []
    _write(value, out, _encode_ascii if ascii_only else _encode_str, quote_keys)
    return "".join(out)


def _write(v: Any, out: list[str], enc: Callable[[str], str], quote_keys: bool) -> None:
    """Append ``v``'s text to ``out`` (a module function: a recursive closure would be a reference
    cycle, left for the cyclic garbage collector on every call)."""
    if isinstance(v, str):
        out.append(enc(v))
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif v is None:
        out.append("null")
    elif isinstance(v, int):
        out.append(str(v))
    elif isinstance(v, float):
        out.append(repr(v) if v == v and v not in (float("inf"), float("-inf")) else "null")
    elif isinstance(v, dict):
        out.append("{")
        first = True
        for k, item in v.items():
            if not first:
                out.append(",")
            first = False
            if isinstance(k, str):
                out.append(enc(k))
            elif isinstance(k, ObjectKey):
                _write(dict(k), out, enc, quote_keys)
            elif isinstance(k, int):
                out.append(f'"{k}"' if quote_keys else str(k))
            else:
                raise BodyError(f"cannot write a map key of type {type(k).__name__}")
            out.append(":")
            _write(item, out, enc, quote_keys)
        out.append("}")
    elif isinstance(v, (list, tuple)):
        out.append("[")
        for i, item in enumerate(v):
            if i:
                out.append(",")
            _write(item, out, enc, quote_keys)
        out.append("]")
    else:
        raise BodyError(f"cannot write a value of type {type(v).__name__}")
