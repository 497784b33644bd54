"""10,000 random connects, pulls, sends, clock moves and disconnects: afterwards no held pull,
timer or per-connection entry is left (apache/rocketmq#7481 leaked exactly these)."""

from __future__ import annotations

from codec.codes import PullSysFlag

import random

from ..server.harness import Client


def test_held_table_is_empty_after_random_churn(servers, tmp_path) -> None:
    rng = random.Random(7)
    server, reactor = servers(tmp_path, max_held_pulls=500)
    producer = Client(server, "producer")
    producer.send_message("T", b"seed")  # creates T with 4 queues
    clients: list[Client] = []
    for step in range(10_000):
        action = rng.random()
        if action < 0.15 or not clients:
            client = Client(server, f"c{step}")
            for group in ("g0", "g1", "g2"):
                client.heartbeat(group, {"T": "*"})
            clients.append(client)
        elif action < 0.55:
            client = rng.choice(clients)
            client.pull_message("T", rng.randint(0, 3), queue_id=rng.randint(0, 3), group=f"g{rng.randint(0, 2)}",
                 sys_flag=PullSysFlag.SUSPEND, suspend_timeout_millis=rng.choice([1000, 15000]))  # fmt: skip
        elif action < 0.7:
            producer.send_message("T", b"m", queue_id=rng.randint(0, 3))
        elif action < 0.85:
            clients.pop(rng.randrange(len(clients))).conn.connectionLost(None)
        else:
            reactor.advance(rng.random() * 2)
        assert server.holds.count == len(server.holds.held()) <= 500
    for client in clients:  # leave every remaining client with a pull held at its queue's end
        client.pull_message("T", server.store.max_offset("T", 0), queue_id=0, group="g0", sys_flag=PullSysFlag.SUSPEND)
    held_before = server.holds.count
    for client in clients:
        client.conn.connectionLost(None)
    assert held_before > 0 and server.holds.count == 0
    assert not server.holds.held() and not server.holds._held and not server.holds._by_conn
    assert not [c for c in reactor.getDelayedCalls() if getattr(c.func, "__name__", "") == "_expire"]
