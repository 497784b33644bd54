"""Configuration changed while the server runs: UPDATE_BROKER_CONFIG (25, mqadmin
``updateBrokerConfig``) and UPDATE_NAMESRV_CONFIG (318, ``updateNamesrvConfig``), and the
properties text GET_BROKER_CONFIG (26) and GET_NAMESRV_CONFIG (319) answer with.

Only the keys ``SETTINGS`` marks ``runtime`` may change (the name server's: ``runtime`` and
``namesrv``): each of them is read from ``Config`` at use, or carried by ``Server.config_changed``
into what copied it at start. A request is all or nothing: an unknown key or one that needs a
restart is NO_PERMISSION (the reference's answer to a key of its black list), a bad value
SYSTEM_ERROR, and then nothing changes. Unlike the reference, which skips unknown keys and logs
bad values, nothing is accepted and ignored.

As the reference's ``Configuration.update`` does, an accepted change is written at once with every
other setting, as properties text, to the file the server was started with (``-c``), else to
``<storePathRootDir>/config/broker.properties`` (``Config.config_file``); the file is replaced
atomically, and nothing changes when it cannot be written.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable
from typing import Any

from codec.codes import ResponseCode

from ..core.config import SETTINGS, Config, Setting, convert, java_text, parse_properties
from ..core.files import write_bytes_atomic

_BY_KEY = {s.key: s for s in SETTINGS}
#: Keys that change at runtime, but not through an update: where to change them instead.
_CHANGED_ELSEWHERE: dict[str, str] = {}
_BOOLEANS = ("true", "false")


class ConfigUpdateError(ValueError):
    """A refused update: the response code and remark to answer with."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


def runtime_keys(*, namesrv: bool = False) -> list[str]:
    """The keys an update may change (the name server's only, with ``namesrv``)."""
    return [s.key for s in SETTINGS if s.runtime and (s.namesrv or not namesrv)]


def properties_text(config: Config, settings: Iterable[Setting], extra: dict[str, str] | None = None) -> str:
    """``key=value`` lines of ``settings`` (then ``extra``), escaped so ``parse_properties`` reads
    them back as they are."""
    lines = [_line(s.key, java_text(getattr(config, s.field))) for s in settings]
    lines += [_line(key, value) for key, value in (extra or {}).items()]
    return "".join(line + "\n" for line in lines)


def _line(key: str, value: str) -> str:
    def escape(text: str, specials: str) -> str:
        out = []
        for ch in text:
            if ch == "\\" or ch in specials:
                out.append("\\" + ch)
            elif ch in "\n\r\t\f":
                out.append("\\" + {"\n": "n", "\r": "r", "\t": "t", "\f": "f"}[ch])
            else:
                out.append(ch)
        return "".join(out)

    value = escape(value, "")
    if value.startswith(" "):
        value = "\\" + value  # a leading blank is kept only escaped
    return f"{escape(key, ' =:#!')}={value}"


def broker_config_text(config: Config) -> str:
    """The whole broker configuration as written to ``Config.config_file``: every ``serve`` key
    (but the file's own path), then the broker.conf keys rmqproxy keeps without using."""
    settings = [s for s in SETTINGS if s.serve and s.field != "broker_config_path"]
    return properties_text(config, settings, dict(config.extra))


class RuntimeConfig:
    """Checks, applies and persists runtime changes to the one ``Config`` every part holds."""

    def __init__(self, config: Config, on_change: Callable[[set[str]], None]) -> None:
        self.config = config
        self.on_change = on_change
        self.updates = 0

    def update(self, body: bytes | None, *, namesrv: bool = False) -> set[str]:
        """Apply the properties in ``body``; the keys changed. ConfigUpdateError, and nothing
        changed, when a key may not change, a value is bad, or the file cannot be written."""
        try:
            text = (body or b"").decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigUpdateError(ResponseCode.SYSTEM_ERROR, f"the config is not UTF-8 text: {exc}") from None
        values: dict[str, Any] = {}
        for key, raw in parse_properties(text).items():
            setting = self._changeable(key, namesrv)
            values[setting.field] = self._value(setting, raw)
        if not values:
            return set()
        try:
            changed = dataclasses.replace(self.config, **values)
        except ValueError as exc:
            raise ConfigUpdateError(ResponseCode.SYSTEM_ERROR, f"config not changed: {exc}") from None
        path = self.config.config_file
        try:
            # the file keeps its permissions: it may hold a key password (tls.server.keyPassword)
            mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
            write_bytes_atomic(path, broker_config_text(changed).encode("utf-8"), mode)
        except OSError as exc:
            raise ConfigUpdateError(ResponseCode.SYSTEM_ERROR, f"config not changed: cannot write {path}: {exc}") from None
        for field, value in values.items():
            # Config is frozen so nothing else changes it; this is the one place that does, in
            # place, so every part holding it reads the new value at its next use.
            object.__setattr__(self.config, field, value)
        self.updates += 1
        keys = {_FIELD_KEYS[field] for field in values}
        self.on_change(keys)
        return keys

    @staticmethod
    def _changeable(key: str, namesrv: bool) -> Setting:
        setting = _BY_KEY.get(key)
        role = "name-server" if namesrv else "broker"
        if setting is None or not setting.serve or (namesrv and not setting.namesrv):
            raise ConfigUpdateError(
                ResponseCode.NO_PERMISSION,
                f"Can not update config: {key} is not a {role} key of rmqproxy; the ones that change at runtime: "
                + ", ".join(runtime_keys(namesrv=namesrv)),
            )
        if not setting.runtime:
            instead = _CHANGED_ELSEWHERE.get(key, "set it in broker.conf and restart")
            raise ConfigUpdateError(
                ResponseCode.NO_PERMISSION,
                f"Can not update config in black list: {key} does not take effect at runtime in rmqproxy "
                f"through {'updateNamesrvConfig' if namesrv else 'updateBrokerConfig'}; {instead}",
            )
        return setting

    @staticmethod
    def _value(setting: Setting, raw: str) -> Any:
        if setting.type is bool and raw.strip().lower() not in _BOOLEANS:
            raise ConfigUpdateError(ResponseCode.SYSTEM_ERROR, f"{setting.key}={raw!r} is not true or false")
        try:
            value = convert(setting, raw)
        except ValueError as exc:
            raise ConfigUpdateError(ResponseCode.SYSTEM_ERROR, str(exc)) from None
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigUpdateError(ResponseCode.SYSTEM_ERROR, f"{setting.key}={raw!r} is not a finite number")
        return value


_FIELD_KEYS = {s.field: s.key for s in SETTINGS}
