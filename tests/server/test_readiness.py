"""``serve``'s /ready (rmqproxy/observe/readiness.py): ready once it listens, draining from the
moment it is asked to stop; a stop with nothing but held pulls in flight ends at once."""

from __future__ import annotations

from codec.codes import PullSysFlag, ResponseCode as R
from rmqproxy.observe.readiness import DRAINING, READY
from rmqproxy.runtime import CLOSE_WAIT_S

from .harness import Client, make_server


def test_serve_is_ready_once_started_and_draining_once_stopped(tmp_path) -> None:
    server, _reactor = make_server(tmp_path)
    assert server.runtime.readiness.state == READY
    consumer, producer = Client(server, "c@1"), Client(server, "p@1")
    producer.send_message("T", b"first")
    held = consumer.pull_message("T", 1, sys_flag=PullSysFlag.SUSPEND)
    assert consumer.answer(held) is None
    stopped = server.stop()
    assert server.runtime.readiness.state == DRAINING
    assert consumer.answer(held).code == R.PULL_NOT_FOUND  # a held pull does not hold the drain
    assert server.store._closed and consumer.transport.disconnecting
    ended = []
    stopped.addBoth(ended.append)
    _reactor.advance(CLOSE_WAIT_S)  # the clients never report the close: the stop ends anyway
    assert ended == [None]
