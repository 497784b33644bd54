"""One worker of ``rmqproxy proxy --workers N``: its end of the control channel (``control``).

The supervisor (``workers``) owns the name-server port and binds a listening socket per broker
node port; a worker accepts on those sockets, serving its clients with a reactor, sessions and
held pulls of its own (``server.ProxyServer`` built with ``worker``). Over the channel the worker:

- says ``hello`` once it is up, and gets a ``listen`` (a node's name, id, upstream address and
  port, with the socket) for each port of each node, now and as new brokers appear, and a
  ``moved`` when a broker's upstream address changes;
- answers ``scrape`` with its metrics exposition (``metrics``), which the supervisor merges;
- tells ``live``/``gone`` when a client's first connection here joins and its last one leaves,
  and gets ``release`` when the client is gone from every worker (``handoff``).

Each worker holds its share of the proxy's bounds (``worker_share``), so their totals hold for
the proxy. A worker exits with its supervisor (``PR_SET_PDEATHSIG``): killed, it cannot leave
workers accepting on its ports.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import signal
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry
from twisted.internet import defer
from twisted.internet.interfaces import IListeningPort
from twisted.internet.protocol import Factory
from twisted.logger import Logger

from ..core.config import Config
from ..observe.worker_metrics import worker_snapshot
from .control import WORKER_FD, Control, Message
from .nodes import Node

__all__ = ["WorkerLink", "worker_share"]

log = Logger()

_PR_SET_PDEATHSIG = 1


def worker_share(config: Config, workers: int) -> Config:
    """``config`` with one worker's share of the bounds that are totals for the proxy: held
    pulls, buffered reply bytes, unfinished frame bytes (at least one frame each)."""
    if workers <= 1:
        return config
    return dataclasses.replace(
        config,
        max_held_pulls=config.max_held_pulls // workers,
        max_buffered_reply_bytes=max(1, config.max_buffered_reply_bytes // workers),
        max_unfinished_frame_bytes=max(config.max_frame_size, config.max_unfinished_frame_bytes // workers),
    )


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Have the kernel send ``sig`` to this process when its parent dies (Linux; elsewhere nothing)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent died before the call
        os.kill(os.getpid(), sig)



class WorkerLink:
    """A worker's side of the channel (see the module doc); ``factory_for(node)`` builds the
    client-connection factory of a node's port, ``render_metrics()`` (a Deferred) the worker's
    exposition, each sample labelled with its slot (``observe.worker_metrics``)."""

    def __init__(self, slot: int, reactor: Any, factory_for: Callable[[Node], Factory],
                 render_metrics: Callable[[], defer.Deferred]) -> None:  # fmt: skip
        self.slot = slot
        self.reactor = reactor
        self.factory_for = factory_for
        self.render_metrics = render_metrics
        self.nodes: dict[tuple[str, int], Node] = {}
        self.released: Callable[[str], None] = lambda client_id: None  # the lock handoff's, once built
        self.control = Control(self._received, self._lost)
        self._closing = False
        self._stopping = False  # the reactor was asked to stop

    @classmethod
    def of_registry(cls, slot: int, reactor: Any, factory_for: Callable[[Node], Factory],
                    registry: CollectorRegistry) -> WorkerLink:  # fmt: skip
        return cls(slot, reactor, factory_for, lambda: worker_snapshot(registry, reactor, slot))

    def start(self) -> None:
        """Open the channel on ``WORKER_FD`` and say hello."""
        die_with_parent()
        self.reactor.callWhenRunning(self._own_signals)
        self.control.adopt(self.reactor, WORKER_FD)
        os.close(WORKER_FD)  # the reactor has its own copy
        self.control.send({"op": "hello", "slot": self.slot, "pid": os.getpid()})

    # --- the lock handoff's peers -----------------------------------------------------------

    def live(self, client_id: str) -> None:
        self.control.send({"op": "live", "client": client_id})

    def gone(self, client_id: str) -> None:
        self.control.send({"op": "gone", "client": client_id})

    # --- messages ---------------------------------------------------------------------------

    def _received(self, message: Message, fds: list[int]) -> None:
        op = message.get("op")
        if op == "listen":
            self._listen(message, fds)
        elif op == "moved":
            node = self.nodes.get((message["name"], message["id"]))
            if node is not None:
                node.upstream = message["upstream"]
        elif op == "scrape":
            number = message.get("n")
            self.render_metrics().addCallback(
                lambda text: self.control.send({"op": "metrics", "n": number}, payload=text)
            ).addErrback(lambda f: log.failure("worker {slot}: rendering metrics failed", f, slot=self.slot))
        elif op == "release":
            self.released(message["client"])
        else:
            for fd in fds:
                os.close(fd)
            log.warn("control channel: unknown message {op!r} from the supervisor", op=op)

    def _listen(self, message: Message, fds: list[int]) -> None:
        """Accept on the node port whose socket came with ``message``."""
        (fd,) = fds
        key = (message["name"], message["id"])
        node = self.nodes.get(key)
        if node is None:
            node = Node(message["name"], message["id"], message["upstream"], message["port"], message["address"],
                        message["fast"])  # fmt: skip
            self.nodes[key] = node
        try:
            listening: IListeningPort = self.reactor.adoptStreamPort(fd, message["family"], self.factory_for(node))
            node.listening.append(listening)
        finally:
            os.close(fd)  # the reactor has its own copy

    def stop_listening(self) -> None:
        """Accept no more (stopping): the supervisor's sockets stay with the other workers."""
        for node in self.nodes.values():
            for listening in node.listening:
                listening.stopListening()
            node.listening = []

    def close(self) -> None:
        self._closing = True
        if self.control.transport is not None:
            self.control.transport.loseConnection()

    def _lost(self) -> None:
        if not self._closing:
            log.error("worker {slot}: the channel to the supervisor is gone; stopping", slot=self.slot)
            self.reactor.callLater(0, self._stop_reactor)

    def _own_signals(self) -> None:
        """SIGTERM stops the worker once, however often it comes (from the supervisor, and from the
        kernel when the supervisor dies); SIGINT is the supervisor's (a terminal's ^C reaches the
        whole process group, and the supervisor then stops its workers)."""
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, lambda *_: self.reactor.callFromThread(self._stop_reactor))

    def _stop_reactor(self) -> None:
        if self.reactor.running and not self._stopping:
            self._stopping = True
            self.reactor.stop()
