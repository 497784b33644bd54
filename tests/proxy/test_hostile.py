"""Hostile frames on a proxy's broker listener (tests/robustness/hostile.py's, seeded), in process:
nothing a client sends raises out of the proxy, and nothing reaches the broker that it could not
decode, whichever path a frame takes (passed on as bytes, or decoded and relayed)."""

from __future__ import annotations

import random

from codec.errors import CodecError
from codec.peer import RemotingPeer
from rmqproxy.proxy.nodes import Node

from ..robustness.hostile import hostile_frames
from .harness import ProxyClient, make_proxy

NODE = Node("broker-a", 0, "10.1.0.1:10911", 10911, "127.0.0.1:10911")
FRAMES = 3000


def test_hostile_frames_never_raise_and_never_reach_the_broker_undecodable(tmp_path) -> None:
    proxy, reactor, _events = make_proxy(tmp_path)
    stream = hostile_frames(random.Random(41))
    client = ProxyClient(proxy, reactor, NODE)
    forwarded = closes = 0
    for _ in range(FRAMES):
        may_close, frame = next(stream)
        client.conn.dataReceived(frame)  # raises on a bug: nothing a client sends may
        upstream = client.broker.transport.value()
        client.broker.transport.clear()
        try:
            forwarded += len(RemotingPeer().receive(upstream))
        except CodecError as exc:
            raise AssertionError(f"the broker got a frame it cannot decode ({exc}) after {frame[:80]!r}") from None
        closes += client.transport.disconnecting  # the proxy closed it, as serve would
        if may_close:  # closed, or waiting for the rest of a frame that never comes: a new connection
            client.close()
            client = ProxyClient(proxy, reactor, NODE)
    assert forwarded > FRAMES / 4 and closes > FRAMES / 10  # both kinds came, and were told apart
    assert len(proxy.sessions) == 1
