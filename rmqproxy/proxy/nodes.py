"""The upstream broker nodes the proxy stands in for, each behind a listener of its own.

A 4.9.x client names no broker in a heartbeat, a queue lock or a consumer-list request, so the
only thing that tells the proxy which upstream broker such a request is for is the port it came
in on. Every (broker name, broker id) seen in a route or cluster-info answer therefore gets a
local port from ``proxyBrokerPorts``, taken in the order the nodes are first seen; the proxy
primes that order at start from the cluster info, sorted, so a restarted proxy (same cluster)
gives every broker the port it had. The upstream address of a node is updated by every answer
that names it, so a broker that moved is followed.

With ``fastPortEnable`` (the default) each node also listens on its port - 2, its fast (VIP) port
(``rmqproxy/net/fastport.py``), relaying to the same upstream broker; ports are then given so that
both a node's port and its fast port lie in the range and no fast port is another's port: from a
range starting at S, S+2 (fast S), S+3 (fast S+1), S+6 (fast S+4), S+7 (fast S+5), ...
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from twisted.internet.error import CannotListenError
from twisted.internet.interfaces import IListeningPort
from twisted.logger import Logger

from ..net.fastport import FAST_PORT_OFFSET

log = Logger()


class NoFreePort(Exception):
    """Every port of ``proxyBrokerPorts`` is taken."""


class Node:
    """One upstream broker (a master, id 0, or a slave) and the local port that stands for it."""

    __slots__ = ("name", "broker_id", "upstream", "port", "fast_port", "address", "listening", "service_ms")

    def __init__(self, name: str, broker_id: int, upstream: str, port: int, address: str, fast_port: int = 0) -> None:
        self.name = name
        self.broker_id = broker_id
        self.upstream = upstream  # "host:port" of the real broker
        self.port = port
        self.fast_port = fast_port  # its fast (VIP) port, port - 2 (0: none)
        self.address = address  # what routes advertise: "host:port" of the listener
        self.listening: list[IListeningPort] = []  # the port's listener, then the fast port's
        self.service_ms = 1.0  # the broker's usual round trip for a request it does not hold (an estimate)

    @property
    def label(self) -> str:
        """The node as metrics and logs name it: the broker name, with the id of a slave."""
        return self.name if self.broker_id == 0 else f"{self.name}/{self.broker_id}"

    def __repr__(self) -> str:
        return f"<Node {self.label} {self.upstream} via :{self.port}>"


def parse_port_range(text: str, default_start: int) -> range:
    """``proxyBrokerPorts``: "FIRST-LAST" (inclusive); blank means the 100 ports after ``default_start``."""
    if not text.strip():
        return range(default_start + 1, min(default_start + 101, 65536))
    try:
        first, last = (int(part) for part in text.split("-", 1))
    except ValueError:
        raise ValueError(f"proxyBrokerPorts must be FIRST-LAST, not {text!r}") from None
    if not 0 < first <= last < 65536:
        raise ValueError(f"proxyBrokerPorts {text!r} is not a range of port numbers")
    return range(first, last + 1)


class NodeDirectory:
    """(broker name, broker id) -> ``Node``, starting a listener for each new one."""

    def __init__(self, ports: range, host: str, listen: Callable[[Node, int], IListeningPort], *,
                 fast: bool = True, moved: Callable[[Node], None] | None = None) -> None:  # fmt: skip
        """``listen(node, port)`` listens on ``port`` for ``node`` (its port, or its fast port when
        ``fast``); ``moved(node)`` hears of a node whose upstream address changed."""
        self.ports = ports
        self.host = host
        self.fast = fast
        self._listen = listen
        self._moved = moved
        self._nodes: dict[tuple[str, int], Node] = {}
        self._taken: set[int] = set()

    def __iter__(self):
        return iter(list(self._nodes.values()))

    def get(self, name: str, broker_id: int) -> Node | None:
        return self._nodes.get((name, broker_id))

    def localize(self, name: str, broker_id: int, upstream: str) -> str:
        """The advertised address standing for ``upstream`` (``routes.Localize``)."""
        node = self._nodes.get((name, broker_id))
        if node is None:
            node = self._add(name, broker_id, upstream)
        elif node.upstream != upstream:
            log.info("broker {node} moved to {upstream}", node=node, upstream=upstream)
            node.upstream = upstream
            if self._moved is not None:
                self._moved(node)
        return node.address

    def prime(self, nodes: Iterable[tuple[str, int, str]]) -> None:
        """Give ports to ``nodes`` in sorted order (a stable assignment across restarts)."""
        for name, broker_id, upstream in sorted(nodes):
            self.localize(name, broker_id, upstream)

    def _free(self) -> Iterator[tuple[int, int]]:
        """(port, fast port or 0) pairs of the range not taken yet, in order."""
        for port in self.ports:
            fast = port - FAST_PORT_OFFSET if self.fast else 0
            if port in self._taken or (self.fast and (fast not in self.ports or fast in self._taken)):
                continue
            yield port, fast

    def _add(self, name: str, broker_id: int, upstream: str) -> Node:
        for port, fast in self._free():
            self._taken.update((port, fast) if fast else (port,))
            node = Node(name, broker_id, upstream, port, f"{self.host}:{port}", fast)
            try:
                for listen_on in (port, fast) if fast else (port,):
                    node.listening.append(self._listen(node, listen_on))
            except CannotListenError as exc:
                log.warn("proxyBrokerPorts: port {port} is not free ({error}); trying the next", port=exc.port,
                         error=exc)  # fmt: skip
                self._stop(node)
                continue
            self._nodes[(name, broker_id)] = node
            log.info("broker {node} is served on {address}{fast}", node=node, address=node.address,
                     fast=f" (fast port {fast})" if fast else "")  # fmt: skip
            return node
        raise NoFreePort(f"no free port left in proxyBrokerPorts ({self.ports.start}-{self.ports.stop - 1}) "
                         f"for broker {name} id {broker_id}")  # fmt: skip

    @staticmethod
    def _stop(node: Node) -> None:
        for listening in node.listening:
            listening.stopListening()
        node.listening = []

    def close(self) -> None:
        for node in self._nodes.values():
            self._stop(node)
