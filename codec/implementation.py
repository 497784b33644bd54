"""Which codec implementation runs: the compiled hot path (``codec._speedups``) or its pure-Python twin.

The choice is made once, when ``codec`` is imported: compiled when the extension imports, pure
when it does not (not built: no C compiler at install) or when ``RMQPROXY_PURE_PYTHON`` is set to
anything but ``0`` (then the extension is not even imported). ``describe()`` says which and why,
for the start-up log and ``rmqproxy --version``.

The hot modules keep their pure code and call through module-level names; ``use(kind)`` rebinds
every name in ``HOT`` to one implementation's object, so a test can run either in one process.
Code outside these modules must reach a hot name through its module or class
(``frame.FrameDecoder``, ``message.encode_message``), never bind it at import.
"""

from __future__ import annotations

import importlib
import os
from typing import Any, NamedTuple

import codec.command as command  # not "from . import": this module is imported by codec/__init__.py
import codec.frame as frame
import codec.headers as headers
import codec.message as message

COMPILED = "compiled"
PURE = "pure"
ENV = "RMQPROXY_PURE_PYTHON"


class Hot(NamedTuple):
    """One rebindable name: ``owner.attr`` is ``pure`` or ``compiled``."""

    owner: Any
    attr: str
    pure: Any
    compiled: Any


def _load() -> tuple[Any, str]:
    """The extension module (or None) and why the pure path runs ("" when it does not)."""
    forced = os.environ.get(ENV, "")
    if forced and forced != "0":
        return None, f"{ENV}={forced}"
    try:
        return importlib.import_module(f"{__package__}._speedups"), ""
    except ImportError as exc:
        return None, f"extension not built ({type(exc).__name__}: {exc})"


_speedups, _WHY_PURE = _load()


def _hot_names(ext: Any) -> tuple[Hot, ...]:
    """Every name ``use`` rebinds: the pure object as the module defines it, and its compiled twin."""
    rc = command.RemotingCommand
    table = [
        (frame, "FrameDecoder", "FrameDecoder"),
        (command, "_decode_binary", "decode_binary"),
        (command, "_encode_binary", "encode_binary"),
        (command, "_encode_json", "encode_json"),
        (command, "_header_fields", "header_fields"),
        (command, "_decode_json", "decode_json"),
        (headers.HeaderCodec, "decode", "header_decode"),
        (message, "encode_message", "encode_message"),
        (message, "string_to_properties", "string_to_properties"),
        (message, "properties_to_string", "properties_to_string"),
        (rc, "encode_header", "command_encode_header"),
        (command, "peek", "command_peek"),
        (command, "peek_answer", "command_peek_answer"),
    ]
    hot = [Hot(owner, attr, owner.__dict__[attr], getattr(ext, name, None)) for owner, attr, name in table]
    hot.append(Hot(rc, "decode", rc.__dict__["decode"], classmethod(ext.command_decode) if ext else None))
    return tuple(hot)


HOT = _hot_names(_speedups)

#: The implementation the codec starts with: compiled whenever it can be.
DEFAULT = PURE if _speedups is None else COMPILED

_active = PURE


def available() -> bool:
    """Whether the compiled implementation can be used in this process."""
    return _speedups is not None


def unavailable_reason() -> str:
    """Why ``use("compiled")`` would fail ("" when it would not)."""
    return _WHY_PURE


def active() -> str:
    """The implementation now bound: "compiled" or "pure"."""
    return _active


def describe() -> str:
    """The implementation now bound and why: "compiled", or "pure: <reason>"."""
    if _active == COMPILED:
        return COMPILED
    return f"{PURE}: {_WHY_PURE or 'chosen in process (codec.implementation.use)'}"


def use(kind: str) -> str:
    """Bind every hot name to ``kind``'s implementation; returns the one bound before. Raises
    RuntimeError for "compiled" when the extension is not available."""
    global _active
    if kind not in (COMPILED, PURE):
        raise ValueError(f"unknown codec implementation {kind!r} (compiled or pure)")
    if kind == COMPILED and _speedups is None:
        raise RuntimeError(f"the compiled codec is not available: {_WHY_PURE}")
    for hot in HOT:
        setattr(hot.owner, hot.attr, hot.compiled if kind == COMPILED else hot.pure)
    previous, _active = _active, kind
    return previous


use(DEFAULT)
