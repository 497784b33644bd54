"""The fast (VIP) port: a broker's port - 2, which clients with ``vipChannelEnabled`` use.

A reference broker listens on its port - 2 as well (10909 beside 10911); a client with the VIP
channel on (the console's admin client by default, 4.x clients before 4.5.1) derives that address
from a route's broker address and sends its broker requests there. Routes keep naming the main
port; both ``serve`` and ``proxy`` serve the fast port exactly as the main one (same factory, so
the same ACL, TLS and per-connection bounds). ``fastPortEnable=false`` turns it off.
"""

from __future__ import annotations

from collections.abc import Callable

from twisted.internet.error import CannotListenError
from twisted.internet.interfaces import IListeningPort
from twisted.internet.protocol import Factory

__all__ = ["FAST_PORT_OFFSET", "FastPortTaken", "listen_fast"]

#: How far below a broker's port its fast port is (the reference's ``listenPort - 2``).
FAST_PORT_OFFSET = 2


class FastPortTaken(CannotListenError):
    """The fast port of a broker port could not be listened on."""

    def __str__(self) -> str:
        return (f"the fast (VIP) port {self.interface}:{self.port} (broker port - {FAST_PORT_OFFSET}) cannot be "
                f"listened on ({self.socketError}); free it, or set fastPortEnable=false to serve no fast port")


def listen_fast(open_port: Callable[[int, Factory], IListeningPort], port: int, factory: Factory) -> IListeningPort:
    """``open_port(port, factory)`` for the fast port ``port`` (with the main port's ``factory``);
    ``FastPortTaken`` names it if taken."""
    try:
        return open_port(port, factory)
    except CannotListenError as exc:
        raise FastPortTaken(exc.interface, exc.port, exc.socketError) from None
