"""The request paths leave no reference cycles behind.

Garbage in cycles is only freed by CPython's cyclic collector, whose full passes stop the reactor
for as long as they scan (tens of milliseconds with a few thousand held pulls' leftovers): held
pulls then time out late. Everything a request creates must be freed by reference counting.
"""

from __future__ import annotations

import collections
import gc

from codec.bodies import LockBatchRequestBody, MessageQueue
from codec.codes import PullSysFlag, RequestCode as C

from .harness import Client, make_server


def test_sends_pulls_holds_heartbeats_offsets_routes_and_locks_free_everything(tmp_path) -> None:
    server, reactor = make_server(tmp_path)
    client = Client(server, "c@1")
    client.heartbeat("cg", {"T": "*"})
    mq = [MessageQueue("T", server.config.broker_name, 0)]

    def one_round(i: int) -> None:
        client.send_message("T")
        client.answer(client.pull_message("T", i))
        client.pull_message("T", i + 1, sys_flag=PullSysFlag.SUSPEND)  # held, woken by the next send
        client.pull_message("T", 0, queue_id=1, sys_flag=PullSysFlag.SUSPEND)  # held until it times out
        client.heartbeat("cg", {"T": "*"})
        client.call(C.UPDATE_CONSUMER_OFFSET, consumer_group="cg", topic="T", queue_id=0, commit_offset=i)
        client.call(C.GET_ROUTEINFO_BY_TOPIC, topic="T")
        client.call(C.LOCK_BATCH_MQ, body=LockBatchRequestBody("cg", "c@1", None, mq).to_json())
        reactor.advance(20)
        client.read()

    one_round(0)  # first-use caches and tables
    while gc.collect():  # earlier tests' garbage too: a pass can free what unblocks the next
        pass
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for i in range(1, 21):
            one_round(i)
        gc.collect()
        leaked = collections.Counter(type(o).__qualname__ for o in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    server.stop()
    assert not leaked, f"objects freed only by the cyclic collector: {leaked.most_common(10)}"
