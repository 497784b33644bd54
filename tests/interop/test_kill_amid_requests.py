"""``server.kill_amid_requests``, what the crash tests kill servers with: it waits, the server
stopped, for a request on each client connection, and the kill then resets the connections
(where a plain kill of a server with nothing unread closes them with a FIN)."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from .server import free_port, kill_amid_requests

#: A server that accepts one connection and then reads nothing.
_SERVER = """
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
conn, _ = s.accept()
print("accepted", flush=True)
time.sleep(600)
"""


@pytest.fixture
def accepted() -> Iterator[tuple[subprocess.Popen[bytes], socket.socket, int]]:
    """A server process, its port, and a client connection it accepted."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", _SERVER, str(port)], stdout=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                client = socket.create_connection(("127.0.0.1", port), timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        assert proc.stdout is not None and proc.stdout.readline() == b"accepted\n"
        client.settimeout(10)
        with client:
            yield proc, client, port
    finally:
        proc.kill()
        proc.wait()


def _kill(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()
    proc.wait()


def test_a_request_sent_while_the_server_is_stopped_makes_the_kill_reset_the_connection(accepted) -> None:
    proc, client, port = accepted
    threading.Timer(0.5, client.sendall, args=(b"request",)).start()  # comes while the server is stopped
    started = time.monotonic()
    kill_amid_requests([proc.pid], {port}, lambda: _kill(proc), wait=8.0)
    assert time.monotonic() - started < 5.0  # it waited for the request, not for the limit
    with pytest.raises(ConnectionResetError):
        client.recv(1)


def test_without_a_request_the_kill_comes_at_the_limit_and_the_connection_ends_quietly(accepted) -> None:
    proc, client, port = accepted
    started = time.monotonic()
    kill_amid_requests([proc.pid], {port}, lambda: _kill(proc), wait=0.5)
    assert time.monotonic() - started >= 0.5
    assert client.recv(1) == b""  # a FIN: what a Java 4.9.x client does not fail its requests on
