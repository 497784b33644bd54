"""Run as a program: ``sockwrite.write_now`` over a real loopback TCP connection of the real
reactor, printing what happened as JSON (``test_socket_writes.py`` runs it in a subprocess, as a
reactor runs once per process). The server writes PAYLOAD in 1 MiB pieces, straight to the
socket while nothing is queued and queued behind once the socket is full, then closes; the client
checks every byte arrived in order."""

from __future__ import annotations

import json

from twisted.internet import protocol, reactor

from rmqproxy.net.sockwrite import can_write_directly, write_now

PAYLOAD = bytes(range(256)) * 4096 * 8  # 8 MiB: far more than a socket buffer holds
PIECE = 1 << 20
result: dict = {"direct_bytes": 0}


class Writer(protocol.Protocol):
    def connectionMade(self) -> None:
        result["can_write_directly"] = can_write_directly(self.transport)
        for start in range(0, len(PAYLOAD), PIECE):
            result["direct_bytes"] += write_now(self.transport, PAYLOAD[start : start + PIECE])
        self.transport.loseConnection()


class Reader(protocol.Protocol):
    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def dataReceived(self, data: bytes) -> None:
        self.chunks.append(data)

    def connectionLost(self, reason: object = None) -> None:
        received = b"".join(self.chunks)
        result["received_bytes"] = len(received)
        result["intact"] = received == PAYLOAD
        reactor.stop()


def main() -> None:
    port = reactor.listenTCP(0, protocol.Factory.forProtocol(Writer), interface="127.0.0.1")
    reactor.connectTCP("127.0.0.1", port.getHost().port, protocol.ClientFactory.forProtocol(Reader))
    reactor.callLater(60, reactor.stop)
    reactor.run()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
