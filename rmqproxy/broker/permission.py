"""The broker's own permission (``brokerPermission``: READ 4, WRITE 2), the one place that says
whether this broker takes writes and reads (docs/operations.md, "Write permission").

mqadmin ``wipeWritePerm`` (205) and ``addWritePerm`` (327) change it through the name-server role,
``brokerPermission`` in broker.conf sets it at start, and a runtime change of that key
(UPDATE_BROKER_CONFIG, mqadmin ``updateBrokerConfig -k brokerPermission``) calls ``configure``. Routes advertise each topic's perm masked by it, sends
and send-backs are refused NO_PERMISSION while it lacks WRITE, pulls while it lacks READ.

A runtime change is kept in ``<store>/config/brokerPermission.json`` with the broker.conf value it
overrode: a restart keeps a wiped broker wiped, unless broker.conf's ``brokerPermission`` was
changed since (then the file's value is stale and broker.conf wins).
"""

from __future__ import annotations

from pathlib import Path

from twisted.logger import Logger

from ..core.files import read_json, write_json_atomic
from .topics import PERM_READ, PERM_WRITE

log = Logger()

READ_WRITE = PERM_READ | PERM_WRITE


def check_broker_permission(perm: int) -> str | None:
    """Why ``perm`` cannot be a broker's permission, or None (READ and WRITE bits, INHERIT too)."""
    if isinstance(perm, bool) or not isinstance(perm, int) or not 0 <= perm <= 7:
        return f"brokerPermission must be 0 to 7 (READ 4 | WRITE 2 | INHERIT 1), not {perm!r}"
    return None


class BrokerPermission:
    """The current ``brokerPermission``; ``writable``/``readable`` are plain attributes, read on
    every send and pull."""

    def __init__(self, path: Path, configured: int) -> None:
        problem = check_broker_permission(configured)
        if problem is not None:
            raise ValueError(problem)
        self.path = path
        self.configured = configured
        self.perm = configured
        saved = read_json(path, None)
        if isinstance(saved, dict):
            perm = saved.get("brokerPermission")
            if saved.get("configured") != configured:
                log.warn("{path} holds brokerPermission={perm} set at runtime over broker.conf's {old}; "
                         "broker.conf now says {new}, which wins", path=path, perm=perm,
                         old=saved.get("configured"), new=configured)  # fmt: skip
            elif check_broker_permission(perm) is None:
                self.perm = perm
            else:
                log.warn("{path}: ignoring brokerPermission={perm!r}, not a permission", path=path, perm=perm)
        self._derive()

    def _derive(self) -> None:
        self.writable = bool(self.perm & PERM_WRITE)
        self.readable = bool(self.perm & PERM_READ)

    def set(self, perm: int) -> None:
        """Make ``perm`` the broker's permission now and after a restart (ValueError if it is not one;
        OSError if it cannot be saved, and then nothing changes)."""
        problem = check_broker_permission(perm)
        if problem is not None:
            raise ValueError(problem)
        write_json_atomic(self.path, {"brokerPermission": perm, "configured": self.configured})
        if perm != self.perm:
            log.info("brokerPermission {old} -> {new}", old=self.perm, new=perm)
        self.perm = perm
        self._derive()

    def configure(self, perm: int) -> None:
        """``brokerPermission`` changed in broker.conf at runtime (UPDATE_BROKER_CONFIG, which
        persists the file): it is the configured value from now on, and the current one."""
        self.configured = perm
        self.set(perm)

    def wipe_write(self) -> None:
        """Take WRITE away (``wipeWritePerm``)."""
        self.set(self.perm & ~PERM_WRITE)

    def add_write(self) -> None:
        """Give READ and WRITE back (``addWritePerm``, which sets perm 6 on the reference's routes)."""
        self.set(self.perm | READ_WRITE)

    def route_perm(self, topic_perm: int) -> int:
        """A topic's perm as routes advertise it: its READ and WRITE only where the broker has them."""
        return topic_perm & ~READ_WRITE | topic_perm & self.perm & READ_WRITE
