"""A blocking remoting client in raw frames, for tests that talk to a server under test (rmqproxy or
the reference broker) the way a non-Java client would::

    with WireClient(server.broker_addr) as wire:
        wire.call(RequestCode.UPDATE_CONSUMER_OFFSET, consumer_group="g", topic="T", queue_id=0,
                  commit_offset=-1)
"""

from __future__ import annotations

import socket
from typing import Any, Self

from codec.codes import RequestCode as C
from codec.command import RemotingCommand
from codec.frame import FrameDecoder
from codec.headers import REQUEST_HEADERS
from codec.peer import ANSWER, RemotingPeer

__all__ = ["WireClient", "roundtrip"]


def roundtrip(sock: socket.socket, command: RemotingCommand) -> RemotingCommand:
    """Write ``command`` and read frames until one arrives; that frame, decoded."""
    sock.sendall(command.encode())
    decoder = FrameDecoder()
    while True:
        data = sock.recv(65536)
        assert data, "server closed the connection"
        frames = decoder.feed(data)
        if frames:
            return RemotingCommand.decode(frames[0])


class WireClient:
    """One connection to ``host:port``; ``call`` sends a typed request and returns its answer."""

    def __init__(self, addr: str, timeout: float = 5.0) -> None:
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.peer = RemotingPeer()

    def call(self, code: int, body: bytes = b"", **fields: Any) -> RemotingCommand:
        """``fields`` build the code's typed header (``codec.headers``). Requests the server sends
        meanwhile (notifications) are skipped: the answer is the one matched to this request."""
        ext = REQUEST_HEADERS[code].encode(REQUEST_HEADERS[code].cls(**fields)) if fields else None
        opaque, data = self.peer.request(RemotingCommand(code=code, ext_fields=ext, body=body))
        self.sock.sendall(data)
        while True:
            chunk = self.sock.recv(65536)
            assert chunk, "server closed the connection"
            for incoming in self.peer.receive(chunk):
                if incoming.kind is ANSWER and incoming.outstanding.opaque == opaque:
                    return incoming.command

    def send(self, topic: str, body: bytes, queue_id: int = 0, group: str = "pg") -> RemotingCommand:
        """SEND_MESSAGE_V2 of one message without properties to ``queue_id`` (auto-creating the
        topic with one queue)."""
        return self.call(C.SEND_MESSAGE_V2, body=body, producer_group=group, topic=topic, default_topic="TBW102",
                         default_topic_queue_nums=1, queue_id=queue_id, sys_flag=0, born_timestamp=1, flag=0,
                         properties="")  # fmt: skip

    def create_topic(self, topic: str, queues: int) -> RemotingCommand:
        """UPDATE_AND_CREATE_TOPIC (mqadmin updateTopic) with ``queues`` read and write queues."""
        return self.call(C.UPDATE_AND_CREATE_TOPIC, topic=topic, default_topic="TBW102", read_queue_nums=queues,
                         write_queue_nums=queues, perm=6, topic_filter_type="SINGLE_TAG", order=False)  # fmt: skip

    def pull(self, group: str, topic: str, queue_id: int, offset: int, max_nums: int = 32) -> RemotingCommand:
        """PULL_MESSAGE answered at once (no suspend, no commit)."""
        return self.call(C.PULL_MESSAGE, consumer_group=group, topic=topic, queue_id=queue_id, queue_offset=offset,
                         max_msg_nums=max_nums, sys_flag=0, commit_offset=0, suspend_timeout_millis=0,
                         sub_version=0)  # fmt: skip

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
