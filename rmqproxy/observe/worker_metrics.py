"""One ``/metrics`` for ``proxy --workers N``: each worker's exposition, merged by the supervisor.

A worker sends its whole exposition as bytes (``worker_snapshot``: the text its own ``/metrics``
would serve, live gauges included, with ``worker="<slot>"`` added to every sample, rendered and
labelled a slice per reactor turn: the workers do that work, in parallel, not the supervisor).
The supervisor keeps the latest of each slot (``WorkerExpositions``) and renders them with its own
registry as one text exposition: each family's HELP and TYPE once, then the samples of that family
from every slot. A snapshot is split at its families once, when it arrives; a render is a join.
Numbers and escapes pass through as the worker wrote them.

A slot whose worker is down keeps its last snapshot's counters and histograms, so sums do not dip
while it restarts; its gauges (held pulls, connections: state that died with it) are dropped. The
restarted worker continues its counters from the slot's file (``counter_file``), at or above that
last snapshot.
"""

from __future__ import annotations

import re
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from twisted.internet import defer

from .exposition import render_in_turns

__all__ = ["WORKER_LABEL", "WorkerExpositions", "worker_snapshot"]

WORKER_LABEL = "worker"
#: The families a down worker's slot keeps: what it counted up to its death.
_KEPT_WHEN_DOWN = frozenset({"counter", "histogram", "summary"})
_LABELLED = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\{", re.MULTILINE)
_UNLABELLED = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*) ", re.MULTILINE)


def worker_snapshot(registry: CollectorRegistry, reactor: Any, slot: int) -> defer.Deferred:
    """Slot ``slot``'s whole exposition for the supervisor, as bytes, every sample labelled with the
    slot; rendered as its ``/metrics`` is, a slice per reactor turn, so it never holds a pull's deadline."""
    chunks: list[bytes] = []

    def write(chunk: bytes) -> None:
        chunks.append(label_samples(chunk.decode(), slot).encode())

    return render_in_turns(registry, reactor, write).addCallback(lambda _: b"".join(chunks))


def label_samples(text: str, slot: int) -> str:
    """``text`` (whole lines of a text exposition) with ``worker="<slot>"`` first in every sample's labels."""
    text = _LABELLED.sub(rf'\g<1>{{{WORKER_LABEL}="{slot:d}",', text)
    return _UNLABELLED.sub(rf'\g<1>{{{WORKER_LABEL}="{slot:d}"}} ', text)


class _Family:
    """One family of one exposition: its HELP and TYPE lines, its type, its sample lines."""

    __slots__ = ("header", "kind", "samples")

    def __init__(self, header: str, kind: str, samples: str) -> None:
        self.header = header
        self.kind = kind
        self.samples = samples


def _families(text: str) -> dict[str, _Family]:
    """The families of a text exposition, by name."""
    families: dict[str, _Family] = {}
    for part in ("\n" + text).split("\n# HELP ")[1:]:
        help_line, _, rest = part.partition("\n")
        type_line, _, samples = rest.partition("\n")
        typed = type_line.startswith("# TYPE ")  # generate_latest always writes it
        if not typed:
            samples = rest
        header = f"# HELP {help_line}\n{type_line}\n" if typed else f"# HELP {help_line}\n"
        if samples and not samples.endswith("\n"):
            samples += "\n"
        kind = type_line.rpartition(" ")[2] if typed else "untyped"
        families[help_line.partition(" ")[0]] = _Family(header, kind, samples)
    return families


class WorkerExpositions:
    """The latest exposition of each worker slot, rendered with the supervisor's own as one."""

    def __init__(self) -> None:
        self._slots: dict[int, dict[str, _Family]] = {}

    def update(self, slot: int, snapshot: bytes) -> None:
        """Slot ``slot``'s worker sent ``snapshot`` (its ``worker_snapshot``): it replaces the last."""
        self._slots[slot] = _families(snapshot.decode())

    def worker_down(self, slot: int) -> None:
        """Slot ``slot``'s worker died: keep what it counted, drop its gauges, until its successor reports."""
        families = self._slots.get(slot, {})
        self._slots[slot] = {name: f for name, f in families.items() if f.kind in _KEPT_WHEN_DOWN}

    def forget(self, slot: int) -> None:
        """Slot ``slot`` is no more (fewer workers): its series end."""
        self._slots.pop(slot, None)

    def render(self, own: CollectorRegistry | None = None) -> bytes:
        """The supervisor's ``/metrics``: its own registry's families (no ``worker`` label) and every
        slot's, each family's HELP and TYPE once (the first seen), slots in order."""
        parts = [_families(generate_latest(own).decode())] if own is not None else []
        parts += [self._slots[slot] for slot in sorted(self._slots)]
        merged: dict[str, list[str]] = {}
        for families in parts:
            for name, family in families.items():
                lines = merged.get(name)
                if lines is None:
                    merged[name] = [family.header, family.samples]
                else:
                    lines.append(family.samples)
        return "".join(text for lines in merged.values() for text in lines).encode()

