"""The name server's KV config: namespaces of string keys and values (mqadmin ``updateKvConfig``,
``deleteKvConfig``, and ``updateTopic -o true``/``updateOrderConf``, which keep
``ORDER_TOPIC_CONFIG``: topic -> ``brokerName:queueNums[;...]``, what routes carry as
``orderTopicConf`` when ``orderMessageEnable`` is on).

Persisted as the reference's ``KVConfigManager`` persists it: ``{"configTable": {namespace:
{key: value}}}`` in ``<storePathRootDir>/config/kvConfig.json``, written whole (atomic replace)
at each change. Changes are rare admin requests, so the write is made on the spot. Bounded: names
and values by length, the table by ``kvConfigMaxEntries`` (read at each put, so a runtime change
applies at once); a put past a bound raises KVError and changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..core.files import read_json, write_json_atomic

ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"  # the reference's NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG
MAX_NAME_LENGTH = 255  # a namespace or a key
MAX_VALUE_LENGTH = 16 * 1024


class KVError(ValueError):
    """A put or a file refused: the message says why."""


class KVConfig:
    """Every namespace's entries; ``max_entries`` is asked at each put."""

    def __init__(self, path: Path, max_entries: Callable[[], int]) -> None:
        self.path = path
        self.max_entries = max_entries
        data = read_json(path, {})
        table = data.get("configTable", {}) if isinstance(data, dict) else None
        if not isinstance(table, dict) or not all(
            isinstance(ns, str) and isinstance(kv, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in kv.items())
            for ns, kv in table.items()
        ):
            raise KVError(f"{path}: configTable is not a map of namespaces to string maps")
        self.table: dict[str, dict[str, str]] = {ns: dict(kv) for ns, kv in table.items() if kv}

    @property
    def count(self) -> int:
        """Entries in all namespaces."""
        return sum(len(kv) for kv in self.table.values())

    def get(self, namespace: str, key: str) -> str | None:
        return self.table.get(namespace, {}).get(key)

    def namespace(self, namespace: str) -> dict[str, str] | None:
        """A copy of ``namespace``'s entries, None when it has none."""
        entries = self.table.get(namespace)
        return dict(entries) if entries else None

    def put(self, namespace: str, key: str, value: str) -> None:
        """Add or replace one entry and persist; KVError past a bound."""
        for kind, text in (("namespace", namespace), ("key", key)):
            if not text or len(text) > MAX_NAME_LENGTH:
                raise KVError(f"the KV config {kind} must be 1 to {MAX_NAME_LENGTH} characters, not {len(text)}")
        if len(value) > MAX_VALUE_LENGTH:
            raise KVError(f"the KV config value must be at most {MAX_VALUE_LENGTH} characters, not {len(value)}")
        if self.get(namespace, key) is None and self.count >= self.max_entries():
            raise KVError(f"the KV config is full: {self.count} entries (kvConfigMaxEntries={self.max_entries()})")
        entries = self.table.setdefault(namespace, {})
        previous = entries.get(key)
        entries[key] = value
        try:
            self._persist()
        except OSError:
            if previous is None:
                del entries[key]
                if not entries:
                    del self.table[namespace]
            else:
                entries[key] = previous
            raise

    def delete(self, namespace: str, key: str) -> bool:
        """Remove one entry and persist; False when there was none."""
        entries = self.table.get(namespace)
        if entries is None or key not in entries:
            return False
        value = entries.pop(key)
        if not entries:
            del self.table[namespace]
        try:
            self._persist()
        except OSError:
            self.table.setdefault(namespace, {})[key] = value
            raise
        return True

    def _persist(self) -> None:
        write_json_atomic(self.path, {"configTable": self.table})
