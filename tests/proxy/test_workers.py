"""``rmqproxy proxy --workers N`` without processes (rmqproxy/proxy/control.py, worker.py, workers.py,
handoff.py with ``peers``): the control channel's framing and descriptors, a worker's share of
the bounds, the lock handoff through the supervisor, the supervisor's bookkeeping (clients,
restarts, stop, scrapes, ports, readiness) and a worker's side of the channel. Everything runs
on fake reactors and recording transports; descriptors are real (pipes, sockets) where a test
checks who closes them."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import socket
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from twisted.internet import defer
from twisted.internet.error import ProcessDone, ProcessExitedAlready
from twisted.internet.testing import StringTransport
from twisted.logger import globalLogPublisher
from twisted.python.failure import Failure

from codec.codes import RequestCode, ResponseCode
from rmqproxy.core.config import Config
from rmqproxy.observe.readiness import READY, STARTING
from rmqproxy.proxy.control import MAX_PAYLOAD, Control, Message
from rmqproxy.proxy.handoff import LINGER_S
from rmqproxy.proxy.nodes import Node
from rmqproxy.proxy.server import ProxyServer
from rmqproxy.proxy.worker import WorkerLink, worker_share
from rmqproxy.proxy.workers import (
    EXIT_GRACE_S, RESTART_FIRST_S, RESTART_MAX_S, RESTART_RESET_S, SCRAPE_TIMEOUT_S, Supervisor, _BoundPort,
    _WorkerProcess, listening_socket,
)  # fmt: skip

from ..server.harness import FakeReactor
from .harness import ProxyClient, _Events, heartbeat, lock_queues

NODE = Node("broker-a", 0, "10.1.0.1:10911", 10911, "127.0.0.1:10911")
OTHER = Node("broker-b", 0, "10.1.0.2:10911", 10921, "127.0.0.1:10921")


# --- helpers --------------------------------------------------------------------------------


class RecordingTransport(StringTransport):
    """A channel end's transport: every descriptor sent and every write, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, Any]] = []

    def sendFileDescriptor(self, fd: int) -> None:
        self.events.append(("fd", fd))

    def write(self, data: bytes) -> None:
        self.events.append(("write", data))
        super().write(data)

    def messages(self) -> list[Message]:
        """Every message written, decoded (a payload as ``payload``)."""
        return _decode(self.value())

    def fds_of(self, op: str) -> list[list[int]]:
        """The descriptors sent with each message ``op``, in order."""
        out, pending, payload = [], [], 0
        for kind, value in self.events:
            if kind == "fd":
                pending.append(value)
            elif payload:
                payload -= len(value)  # a payload's bytes: no message line
            else:
                message = json.loads(value)
                if message["op"] == op:
                    out.append(pending)
                pending, payload = [], message.get("bytes", 0)
        return out


def _decode(data: bytes) -> list[Message]:
    """Messages as ``Control.send`` writes them: a JSON line each, its payload's bytes after it."""
    out = []
    while data:
        line, data = data.split(b"\n", 1)
        message = json.loads(line)
        size = message.get("bytes", 0)
        if size:
            message["payload"], data = data[:size], data[size:]
        out.append(message)
    return out


def _line(message: Message, payload: bytes = b"") -> bytes:
    """``message`` as the channel carries it (with its payload after the line)."""
    if payload:
        message = {**message, "bytes": len(payload)}
    return json.dumps(message).encode() + b"\n" + payload


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _fired(d: defer.Deferred) -> bool:
    fired: list[Any] = []
    d.addBoth(fired.append)
    return bool(fired)


@pytest.fixture
def logged() -> Iterator[list[dict]]:
    """Every log event while the test runs."""
    seen: list[dict] = []
    globalLogPublisher.addObserver(seen.append)
    try:
        yield seen
    finally:
        globalLogPublisher.removeObserver(seen.append)


def _said(seen: list[dict], words: str) -> bool:
    return any(words in str(e.get("log_format", "")) for e in seen)


class _Receiver:
    """A ``Control`` on a recording transport, keeping what it is handed."""

    def __init__(self) -> None:
        self.got: list[tuple[Message, list[int]]] = []
        self.lost = 0
        self.control = Control(lambda m, fds: self.got.append((m, fds)), self._lost)
        self.transport = RecordingTransport()
        self.control.makeConnection(self.transport)

    def _lost(self) -> None:
        self.lost += 1


# --- the control channel --------------------------------------------------------------------


def test_a_message_goes_out_as_its_descriptors_then_one_line_that_counts_them() -> None:
    end = _Receiver()
    end.control.send({"op": "listen", "name": "broker-a"}, [7, 9])
    end.control.send({"op": "hello"})
    assert end.transport.events == [
        ("fd", 7), ("fd", 9), ("write", b'{"op":"listen","name":"broker-a","fds":2}\n'),
        ("write", b'{"op":"hello","fds":0}\n'),
    ]  # fmt: skip


def test_sending_before_the_channel_is_connected_is_a_no_op() -> None:
    Control(lambda m, fds: None, lambda: None).send({"op": "hello"}, [5])  # no transport: nothing raises


def test_each_received_message_gets_its_own_descriptors_in_order() -> None:
    """Descriptors arrive ahead of their message's bytes (SCM_RIGHTS rides with the first bytes);
    each message claims the ones its ``fds`` counts, oldest first, across several messages and
    lines split over reads."""
    end = _Receiver()
    for fd in (11, 12, 13):
        end.control.fileDescriptorReceived(fd)
    data = _line({"op": "a", "fds": 2}) + _line({"op": "b"}) + _line({"op": "c", "fds": 1})
    end.control.dataReceived(data[:10])
    end.control.dataReceived(data[10:])
    end.control.fileDescriptorReceived(14)
    end.control.dataReceived(_line({"op": "d", "fds": 1}))
    assert [(m["op"], fds) for m, fds in end.got] == [("a", [11, 12]), ("b", []), ("c", [13]), ("d", [14])]


def test_what_one_end_sends_the_other_receives_with_its_descriptors() -> None:
    sender, receiver = _Receiver(), _Receiver()
    sender.control.send({"op": "listen", "port": 20003}, [40, 41])
    sender.control.send({"op": "moved"})
    for kind, value in sender.transport.events:
        if kind == "fd":
            receiver.control.fileDescriptorReceived(value)
        else:
            receiver.control.dataReceived(value)
    assert [(m["op"], fds) for m, fds in receiver.got] == [("listen", [40, 41]), ("moved", [])]
    assert receiver.got[0][0]["port"] == 20003


def test_a_message_claiming_more_descriptors_than_arrived_is_dropped_and_logged(logged: list[dict]) -> None:
    end = _Receiver()
    end.control.fileDescriptorReceived(21)
    end.control.dataReceived(_line({"op": "listen", "fds": 2}) + _line({"op": "hello"}))
    assert [m["op"] for m, _ in end.got] == ["hello"]
    assert _said(logged, "claims {n} descriptors") and not end.transport.disconnecting


@pytest.mark.parametrize("line", [b"not json", b"[1, 2]", b'{"op": "x", "fds": "two"}', b'{"op": "x", "fds": null}'])
def test_a_line_that_is_no_message_is_dropped_and_the_channel_goes_on(line: bytes, logged: list[dict]) -> None:
    end = _Receiver()
    end.control.dataReceived(line + b"\n" + _line({"op": "hello"}))
    assert [m["op"] for m, _ in end.got] == ["hello"]
    assert _said(logged, "no message") and not end.transport.disconnecting


def test_a_failing_handler_is_logged_and_the_next_message_still_handled(logged: list[dict]) -> None:
    got: list[str] = []

    def handle(message: Message, fds: list[int]) -> None:
        if message["op"] == "bad":
            raise KeyError("client")
        got.append(message["op"])

    control = Control(handle, lambda: None)
    control.makeConnection(RecordingTransport())
    control.dataReceived(_line({"op": "bad"}) + _line({"op": "good"}))
    assert got == ["good"] and _said(logged, "handling {op} failed")


def test_a_payload_comes_as_its_bytes_after_the_line_however_the_reads_fall() -> None:
    """A metrics exposition travels unescaped; the message after it is read as a line again."""
    sender = _Receiver()
    payload = b'a_total{worker="1",q="\\n\n"} 1.0\n' * 50
    sender.control.send({"op": "metrics", "n": 3}, payload=payload)
    sender.control.send({"op": "hello"})
    data = sender.transport.value()
    for step in (1, 7, len(data)):
        end = _Receiver()
        for i in range(0, len(data), step):
            end.control.dataReceived(data[i:i + step])
        assert [m for m, _ in end.got] == [{"op": "metrics", "n": 3, "fds": 0, "bytes": len(payload), "payload": payload},
                                           {"op": "hello", "fds": 0}]  # fmt: skip


@pytest.mark.parametrize("size", [-1, "many", MAX_PAYLOAD + 1])
def test_a_payload_of_no_sensible_size_closes_the_channel(size: Any, logged: list[dict]) -> None:
    end = _Receiver()
    end.control.dataReceived(_line({"op": "metrics", "bytes": size}))
    assert end.transport.disconnecting and end.got == [] and _said(logged, "closing the channel")


def test_an_over_long_line_closes_the_channel(logged: list[dict]) -> None:
    end = _Receiver()
    end.control.MAX_LENGTH = 64  # the bound, small enough for a test (MAX_LINE is 1 MiB)
    end.control.dataReceived(b'{"op":"metrics","text":"' + b"x" * 100)
    assert end.transport.disconnecting and end.got == []
    assert _said(logged, "closing the channel")


def test_descriptors_no_message_claimed_are_closed_when_the_channel_is_lost() -> None:
    end = _Receiver()
    read, write = os.pipe()
    end.control.fileDescriptorReceived(read)
    end.control.fileDescriptorReceived(write)
    end.control.connectionLost(None)
    assert not _is_open(read) and not _is_open(write)
    assert end.lost == 1


# --- a worker's share of the bounds ---------------------------------------------------------


def test_a_worker_holds_its_share_of_the_proxy_s_totals() -> None:
    config = Config(max_held_pulls=1000, max_buffered_reply_bytes=64 << 20, max_unfinished_frame_bytes=100 << 20,
                    max_frame_size=16 << 20)  # fmt: skip
    share = worker_share(config, 4)
    assert (share.max_held_pulls, share.max_buffered_reply_bytes, share.max_unfinished_frame_bytes) == (
        250, 16 << 20, 25 << 20)  # fmt: skip
    assert share.max_frame_size == config.max_frame_size  # per-connection bounds stay
    tight = worker_share(dataclasses.replace(config, max_unfinished_frame_bytes=20 << 20, max_buffered_reply_bytes=3), 8)
    assert tight.max_unfinished_frame_bytes == 16 << 20  # at least one whole frame
    assert tight.max_buffered_reply_bytes == 1


def test_one_worker_holds_the_whole_bounds() -> None:
    config = Config(max_held_pulls=1000)
    assert worker_share(config, 1) is config and worker_share(config, 0) is config


# --- the lock handoff through the supervisor ------------------------------------------------


def _worker_proxy(tmp_path: Path, **overrides: Any) -> tuple[ProxyServer, FakeReactor, RecordingTransport]:
    """Worker 1 of 2 on a fake reactor, its channel to the supervisor on a recording transport."""
    values = {"namesrv_addr": "10.1.0.9:9876", "metrics_port": 0, "pull_log_mode": "off",
              "pull_log_path": str(tmp_path / "pulls"), "lock_release_on_disconnect": "immediate", **overrides}  # fmt: skip
    reactor = FakeReactor()
    proxy = ProxyServer(Config(**values), reactor, wall=reactor.wall, worker=1, workers=2)
    proxy.runtime.pull_log = _Events()  # type: ignore[assignment]
    channel = RecordingTransport()
    assert proxy.link is not None
    proxy.link.control.makeConnection(channel)
    return proxy, reactor, channel


def _peer_ops(channel: RecordingTransport) -> list[tuple[str, str]]:
    return [(m["op"], m["client"]) for m in channel.messages() if m["op"] in ("live", "gone")]


def _release(proxy: ProxyServer, client_id: str) -> None:
    """The supervisor says ``client_id`` is gone from every worker."""
    assert proxy.link is not None
    proxy.link.control.dataReceived(_line({"op": "release", "client": client_id}))


def test_a_worker_is_built_with_its_share_and_its_handoff_asks_the_supervisor(tmp_path: Path) -> None:
    proxy, reactor, channel = _worker_proxy(tmp_path, max_held_pulls=1000)
    assert proxy.config.max_held_pulls == 500
    assert proxy.handoff.peers is proxy.link and proxy.link.released == proxy.handoff.released


def test_a_client_s_last_session_here_leaving_waits_for_the_supervisor_before_unlocking(tmp_path: Path) -> None:
    """Gone from this worker is not gone: nothing is unlocked until the supervisor's ``release``;
    then the unlock goes upstream signed as the lock was, the channel closes once it is
    answered, and ``settled`` fires only then."""
    proxy, reactor, channel = _worker_proxy(tmp_path)
    client = ProxyClient(proxy, reactor, NODE)
    heartbeat(client)
    lock = lock_queues(client)
    client.close()
    assert _peer_ops(channel) == [("live", client.client_id), ("gone", client.client_id)]
    assert client.broker.requests(RequestCode.UNLOCK_BATCH_MQ) == []
    assert not client.broker.transport.disconnecting
    settled = proxy.handoff.settled()
    assert not _fired(settled)
    _release(proxy, client.client_id)
    (unlock,) = client.broker.requests(RequestCode.UNLOCK_BATCH_MQ)
    assert (unlock.ext_fields, unlock.body) == (lock.ext_fields, lock.body)
    assert not client.broker.transport.disconnecting and not _fired(settled)
    client.broker.answer(unlock, ResponseCode.SUCCESS)
    assert client.broker.transport.disconnecting
    assert _fired(settled)  # at once, not at the end of LINGER_S
    reactor.advance(LINGER_S)  # the linger's timer is harmless after the release
    assert client.broker.requests(RequestCode.UNLOCK_BATCH_MQ) == [unlock]  # nothing more is sent
    assert _fired(proxy.handoff.settled())


def test_without_the_supervisor_s_word_the_channel_closes_after_linger_and_the_locks_are_forgotten(tmp_path: Path) -> None:
    """The client is alive in another worker: its upstream channel here closes after ``LINGER_S``
    and what it locked here is forgotten (bounded memory); a late ``release`` unlocks nothing."""
    proxy, reactor, channel = _worker_proxy(tmp_path)
    client = ProxyClient(proxy, reactor, NODE)
    heartbeat(client)
    lock_queues(client)
    client.close()
    settled = proxy.handoff.settled()
    reactor.advance(LINGER_S - 0.01)
    assert not client.broker.transport.disconnecting and not _fired(settled)
    reactor.advance(0.01)
    assert client.broker.transport.disconnecting and _fired(settled)
    assert proxy.handoff._locks == {} and proxy.handoff._counts == {} and proxy.handoff._parked == {}
    _release(proxy, client.client_id)
    assert client.broker.requests(RequestCode.UNLOCK_BATCH_MQ) == []


def test_live_is_told_on_a_client_s_first_session_here_and_gone_on_its_last(tmp_path: Path) -> None:
    proxy, reactor, channel = _worker_proxy(tmp_path)
    first = ProxyClient(proxy, reactor, NODE)
    second = ProxyClient(proxy, reactor, OTHER)
    for client in (first, second):
        heartbeat(client)
    heartbeat(first)  # a heartbeat again is no new session
    lock_queues(first)
    first.close()
    assert _peer_ops(channel) == [("live", first.client_id)]
    _release(proxy, first.client_id)  # a release while the client is still live here is not for us
    assert first.broker.requests(RequestCode.UNLOCK_BATCH_MQ) == []
    second.close()
    assert _peer_ops(channel) == [("live", first.client_id), ("gone", first.client_id)]
    _release(proxy, first.client_id)
    (unlock,) = first.broker.requests(RequestCode.UNLOCK_BATCH_MQ)  # through the session still parked
    assert unlock.code == RequestCode.UNLOCK_BATCH_MQ


def test_a_stopping_worker_keeps_its_channel_until_the_departed_clients_locks_are_released(tmp_path: Path) -> None:
    """Stopping closes the clients; their ``gone`` must reach the supervisor and its ``release``
    come back, so the channel stays open until the handoff has settled, and closes after."""
    proxy, reactor, channel = _worker_proxy(tmp_path)
    client = ProxyClient(proxy, reactor, NODE)
    heartbeat(client)
    lock_queues(client)
    stopped = proxy.stop()
    assert client.transport.disconnecting
    client.close()  # the transport reports the close
    assert _peer_ops(channel)[-1] == ("gone", client.client_id)
    assert not channel.disconnecting and not _fired(stopped)
    _release(proxy, client.client_id)
    (unlock,) = client.broker.requests(RequestCode.UNLOCK_BATCH_MQ)
    client.broker.answer(unlock, ResponseCode.SUCCESS)
    assert _fired(stopped) and channel.disconnecting


# --- the supervisor -------------------------------------------------------------------------


class _ProcessTransport:
    """A worker process as the supervisor sees it: the signals it was sent."""

    def __init__(self) -> None:
        self.signals: list[int] = []
        self.exited = False

    def signalProcess(self, sig: int) -> None:
        if self.exited:
            raise ProcessExitedAlready()
        self.signals.append(sig)


class Fleet:
    """A ``Supervisor`` whose workers are fake processes, each with its channel on a recording
    transport; ``spawned`` lists (slot, time) of every start."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int = 2, **overrides: Any) -> None:
        values = {"namesrv_addr": "10.1.0.9:9876", "metrics_port": 0, "pull_log_mode": "off",
                  "pull_log_path": str(tmp_path / "pulls"), "bind_address": "127.0.0.1", "listen_port": 0,
                  "shutdown_drain_timeout_ms": 3000, **overrides}  # fmt: skip
        self.reactor = _WorkerReactor()
        self.spawned: list[tuple[int, float]] = []
        fleet = self

        def spawn(supervisor: Supervisor, slot: int) -> None:
            control = Control(lambda message, fds: supervisor._received(slot, message, fds), lambda: None)
            control.makeConnection(RecordingTransport())
            worker = _WorkerProcess(supervisor, slot, control, supervisor.reactor.seconds())
            worker.makeConnection(_ProcessTransport())
            supervisor.workers[slot] = worker
            fleet.spawned.append((slot, supervisor.reactor.seconds()))

        monkeypatch.setattr(Supervisor, "_spawn", spawn)
        self.supervisor = sup = Supervisor(Config(**values), self.reactor, [], workers, wall=self.reactor.wall)
        self.primed: list[Any] = []
        monkeypatch.setattr(sup.front, "prime", lambda ready, waiting, stopped: self.primed.append(ready) or defer.succeed(None))
        sup.start()  # listens on the fake reactor, starts every slot; the cluster is read when a test calls ``primed``

    def worker(self, slot: int) -> _WorkerProcess:
        return self.supervisor.workers[slot]

    def channel(self, slot: int) -> RecordingTransport:
        return self.worker(slot).control.transport  # type: ignore[return-value]

    def says(self, slot: int, message: Message, payload: bytes = b"") -> None:
        """Worker ``slot`` sends ``message`` (with ``payload``) to the supervisor."""
        self.worker(slot).control.dataReceived(_line(message, payload))

    def hello(self, *slots: int) -> None:
        for slot in slots:
            self.says(slot, {"op": "hello", "slot": slot, "pid": 1000 + slot})

    def heard(self, slot: int, op: str) -> list[Message]:
        """What the supervisor sent worker ``slot`` of ``op``."""
        return [m for m in self.channel(slot).messages() if m["op"] == op]

    def ends(self, slot: int) -> _WorkerProcess:
        worker = self.worker(slot)
        worker.transport.exited = True
        worker.processEnded(Failure(ProcessDone(0)))
        return worker

    def restart_delays(self) -> list[float]:
        now = self.reactor.seconds()
        return [round(c.getTime() - now, 3) for c in self.reactor.getDelayedCalls()
                if c.func == self.supervisor._respawn]  # fmt: skip

    def close(self) -> None:
        for _node, _port, sock in self.supervisor.ports:
            sock.close()
        if self.supervisor._namesrv_sock is not None:
            self.supervisor._namesrv_sock.close()
        shutil.rmtree(self.supervisor.dir, ignore_errors=True)


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Fleet]:
    fleet = Fleet(tmp_path, monkeypatch)
    yield fleet
    fleet.close()


def test_release_is_broadcast_only_once_a_client_is_gone_from_every_worker(fleet: Fleet) -> None:
    fleet.hello(1, 2)
    fleet.says(1, {"op": "live", "client": "c1"})
    fleet.says(2, {"op": "live", "client": "c1"})
    fleet.says(1, {"op": "gone", "client": "c1"})
    assert fleet.heard(1, "release") == [] and fleet.heard(2, "release") == []
    assert fleet.supervisor.clients == {"c1": {2}}
    fleet.says(2, {"op": "gone", "client": "c1"})
    assert [m["client"] for m in fleet.heard(1, "release")] == ["c1"]
    assert [m["client"] for m in fleet.heard(2, "release")] == ["c1"]
    assert fleet.supervisor.clients == {}


def test_a_worker_that_ends_takes_its_clients_with_it(fleet: Fleet) -> None:
    """Its clients' connections died with it: a client it alone had is released in the others,
    one also live elsewhere is not."""
    fleet.hello(1, 2)
    fleet.says(1, {"op": "live", "client": "only-in-1"})
    fleet.says(1, {"op": "live", "client": "in-both"})
    fleet.says(2, {"op": "live", "client": "in-both"})
    fleet.ends(1)
    assert [m["client"] for m in fleet.heard(2, "release")] == ["only-in-1"]
    assert fleet.supervisor.clients == {"in-both": {2}}


def test_a_message_from_a_worker_that_ended_is_ignored(fleet: Fleet) -> None:
    fleet.hello(1, 2)
    ended = fleet.ends(1)
    ended.control.transport.disconnecting = False  # a line already read as it ended
    ended.control.dataReceived(_line({"op": "live", "client": "c1"}))
    assert fleet.supervisor.clients == {}


def test_a_worker_that_keeps_dying_young_waits_longer_each_time_up_to_the_cap(fleet: Fleet) -> None:
    fleet.hello(1, 2)
    delays = []
    for _ in range(9):
        fleet.reactor.advance(1.0)  # dies young
        fleet.ends(1)
        (delay,) = fleet.restart_delays()
        delays.append(delay)
        fleet.reactor.advance(delay)
        assert fleet.spawned[-1] == (1, fleet.reactor.seconds())
    assert delays == [0.2, 0.4, 0.8, 1.6, 3.2, 6.4, RESTART_MAX_S, RESTART_MAX_S, RESTART_MAX_S]
    fleet.reactor.advance(RESTART_RESET_S)  # this one lived long
    fleet.ends(1)
    assert fleet.restart_delays() == [RESTART_FIRST_S]
    fleet.reactor.advance(RESTART_FIRST_S)
    fleet.reactor.advance(1.0)
    fleet.ends(1)
    assert fleet.restart_delays() == [2 * RESTART_FIRST_S]


def test_each_slot_has_its_own_restart_delay(fleet: Fleet) -> None:
    for _ in range(3):
        fleet.ends(1)
        fleet.reactor.advance(max(fleet.restart_delays()))
    fleet.ends(2)
    assert fleet.restart_delays() == [RESTART_FIRST_S]


def test_a_worker_that_ends_while_the_proxy_stops_is_not_started_again(fleet: Fleet) -> None:
    fleet.hello(1, 2)
    fleet.ends(1)  # a restart is pending
    fleet.supervisor.stop()
    fleet.ends(2)
    fleet.reactor.advance(RESTART_MAX_S)
    assert [slot for slot, _ in fleet.spawned] == [1, 2] and fleet.supervisor.workers == {}


def test_stop_sends_sigterm_and_fires_once_every_worker_has_ended(fleet: Fleet) -> None:
    fleet.hello(1, 2)
    stopped = fleet.supervisor.stop()
    assert [fleet.worker(s).transport.signals for s in (1, 2)] == [[signal.SIGTERM], [signal.SIGTERM]]
    fleet.ends(1)
    assert not _fired(stopped)
    fleet.ends(2)
    assert _fired(stopped)
    assert fleet.reactor.getDelayedCalls() == []  # no kill timer left behind


def test_a_worker_that_has_not_exited_after_the_grace_is_killed(fleet: Fleet) -> None:
    fleet.hello(1, 2)
    stopped = fleet.supervisor.stop()
    fleet.ends(1)
    straggler = fleet.worker(2)
    fleet.reactor.advance(3.0 + EXIT_GRACE_S - 0.01)
    assert straggler.transport.signals == [signal.SIGTERM]
    fleet.reactor.advance(0.01)
    assert straggler.transport.signals == [signal.SIGTERM, signal.SIGKILL] and not _fired(stopped)
    fleet.ends(2)
    assert _fired(stopped)


def test_stop_with_no_worker_running_fires(fleet: Fleet) -> None:
    fleet.ends(1)
    fleet.ends(2)
    assert _fired(fleet.supervisor.stop())


def _snapshot(slot: int, value: float) -> bytes:
    """A worker's exposition of one counter, as ``worker_snapshot`` labels it."""
    return f'# HELP a_total A count.\n# TYPE a_total counter\na_total{{worker="{slot}"}} {value}\n'.encode()


def _counts(fleet: Fleet) -> dict[str, float]:
    """``a_total`` by worker, as the supervisor's /metrics renders it."""
    (family,) = text_string_to_metric_families(fleet.supervisor.metrics.render().decode())
    return {sample.labels["worker"]: sample.value for sample in family.samples}


def test_a_scrape_answers_once_every_greeted_worker_has(fleet: Fleet) -> None:
    fleet.hello(1)  # worker 2 is not up: not asked
    fleet.supervisor.count = 2
    fleet.hello(2)
    done = fleet.supervisor._gather()
    (ask1,), (ask2,) = fleet.heard(1, "scrape"), fleet.heard(2, "scrape")
    assert ask1["n"] == ask2["n"]
    fleet.says(1, {"op": "metrics", "n": ask1["n"]}, _snapshot(1, 1.0))
    assert not _fired(done)
    fleet.says(2, {"op": "metrics", "n": ask2["n"]}, _snapshot(2, 2.0))
    assert _fired(done)
    assert _counts(fleet) == {"1": 1.0, "2": 2.0}
    assert fleet.reactor.getDelayedCalls() == []  # the timeout is cancelled


def test_a_scrape_asks_only_greeted_workers_and_none_greeted_answers_at_once(fleet: Fleet) -> None:
    assert _fired(fleet.supervisor._gather())
    fleet.hello(2)
    fleet.supervisor._gather()
    assert fleet.heard(1, "scrape") == [] and len(fleet.heard(2, "scrape")) == 1


def test_a_scrape_answers_after_the_timeout_and_a_late_answer_is_kept_for_the_next(fleet: Fleet) -> None:
    fleet.hello(1, 2)
    done = fleet.supervisor._gather()
    (ask,) = fleet.heard(1, "scrape")
    fleet.says(1, {"op": "metrics", "n": ask["n"]}, _snapshot(1, 1.0))
    fleet.reactor.advance(SCRAPE_TIMEOUT_S - 0.01)
    assert not _fired(done)
    fleet.reactor.advance(0.01)
    assert _fired(done)
    fleet.says(2, {"op": "metrics", "n": ask["n"]}, _snapshot(2, 2.0))  # late: no error
    assert _counts(fleet) == {"1": 1.0, "2": 2.0}
    assert fleet.supervisor._scrapes == {}


def _listens(fleet: Fleet, slot: int) -> list[tuple[Message, list[int]]]:
    return list(zip(fleet.heard(slot, "listen"), fleet.channel(slot).fds_of("listen")))


def test_a_new_node_s_sockets_go_to_every_greeted_worker_and_a_restarted_worker_gets_them_all(fleet: Fleet) -> None:
    """A node port is bound once, by the supervisor, and each greeted worker is handed the socket;
    a worker that says hello later (or again, restarted) is handed every socket bound so far."""
    sup = fleet.supervisor
    sup.front.nodes._listen = lambda node, port: sup._bind(node, 0)  # any free port: the test binds for real
    fleet.hello(1)
    address = sup.front.nodes.localize("broker-a", 0, "10.1.0.1:10911")
    node = sup.front.nodes.get("broker-a", 0)
    assert node is not None and address == node.address
    socks = [sock for _node, _port, sock in sup.ports]
    assert len(socks) == 2  # the node's port and its fast port
    listens = _listens(fleet, 1)
    assert [fds for _, fds in listens] == [[s.fileno()] for s in socks]
    message = listens[0][0]
    assert (message["name"], message["id"], message["upstream"], message["port"], message["fast"], message["address"],
            message["family"]) == ("broker-a", 0, "10.1.0.1:10911", node.port, node.fast_port, node.address,
                                   int(socket.AF_INET))  # fmt: skip
    assert [m["listen_on"] for m, _ in listens] == [port for _node, port, _sock in sup.ports]
    assert fleet.heard(2, "listen") == []  # not up yet
    fleet.hello(2)
    assert [fds for _, fds in _listens(fleet, 2)] == [[s.fileno()] for s in socks]
    fleet.ends(1)
    fleet.reactor.advance(RESTART_FIRST_S)
    assert fleet.heard(1, "listen") == []  # the new worker's channel: nothing before its hello
    fleet.hello(1)
    assert [fds for _, fds in _listens(fleet, 1)] == [[s.fileno()] for s in socks]
    for sock in socks:
        assert sock.getsockname()[0] == "127.0.0.1"
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)


def test_a_moved_broker_is_told_to_every_worker(fleet: Fleet) -> None:
    sup = fleet.supervisor
    sup.front.nodes._listen = lambda node, port: sup._bind(node, 0)
    fleet.hello(1, 2)
    sup.front.nodes.localize("broker-a", 0, "10.1.0.1:10911")
    sup.front.nodes.localize("broker-a", 0, "10.1.0.7:10911")
    for slot in (1, 2):
        assert fleet.heard(slot, "moved") == [{"op": "moved", "name": "broker-a", "id": 0, "upstream": "10.1.0.7:10911",
                                               "fds": 0}]  # fmt: skip


def test_a_closed_node_socket_is_not_handed_out(fleet: Fleet) -> None:
    sup = fleet.supervisor
    bound = sup._bind(NODE, 0)
    bound.stopListening()
    fleet.hello(1)
    assert fleet.heard(1, "listen") == []


def test_a_port_that_cannot_be_bound_is_a_cannot_listen_error(fleet: Fleet) -> None:
    from twisted.internet.error import CannotListenError

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        with pytest.raises(CannotListenError):
            fleet.supervisor._bind(NODE, taken.getsockname()[1])
    finally:
        taken.close()
    assert fleet.supervisor.ports == []


def test_ready_only_once_the_cluster_is_read_and_every_worker_is_up(fleet: Fleet) -> None:
    readiness = fleet.supervisor.runtime.readiness
    fleet.hello(1)
    assert readiness.state == STARTING
    (primed,) = fleet.primed
    primed()
    assert readiness.state == STARTING and "1 of 2 workers" in readiness.reason
    fleet.ends(2)
    fleet.reactor.advance(RESTART_FIRST_S)
    fleet.hello(2)
    assert readiness.state == READY


def test_the_name_server_port_is_bound_at_start_and_accepts_once_every_worker_is_up(fleet: Fleet) -> None:
    """A client given a route must find a worker on its port: till all are up, connections queue."""
    sock = fleet.supervisor._namesrv_sock
    assert sock is not None and sock.getsockname()[1] > 0  # bound (a busy port fails the start)
    fleet.hello(1)
    assert fleet.reactor.adopted == [] and fleet.supervisor.runtime.ports == []
    fleet.hello(2)
    ((fd, family, _factory, was_open),) = fleet.reactor.adopted
    assert was_open and family == socket.AF_INET and len(fleet.supervisor.runtime.ports) == 1
    assert sock.fileno() == -1  # its own copy closed: the reactor's stays
    fleet.ends(1)
    fleet.reactor.advance(RESTART_FIRST_S)
    fleet.hello(1)
    assert len(fleet.reactor.adopted) == 1  # once only


def test_the_supervisor_s_own_held_pull_limit_is_zero_so_the_workers_shares_add_up(fleet: Fleet) -> None:
    """It holds no pulls; each worker exports its share of maxHeldPulls (``worker_share``)."""
    registry = fleet.supervisor.runtime.registry
    assert registry.get_sample_value("rmqproxy_held_pulls_limit") == 0
    assert fleet.supervisor.config.max_held_pulls > 0  # the total the workers split


def test_ready_waits_for_the_cluster_even_with_every_worker_up(fleet: Fleet) -> None:
    fleet.hello(1, 2)
    assert fleet.supervisor.runtime.readiness.state == STARTING
    fleet.primed[0]()
    assert fleet.supervisor.runtime.readiness.state == READY


def test_a_worker_never_sends_descriptors_and_any_it_does_are_closed(fleet: Fleet) -> None:
    read, write = os.pipe()
    control = fleet.worker(1).control
    control.fileDescriptorReceived(read)
    control.dataReceived(_line({"op": "hello", "fds": 1}))
    os.close(write)
    assert not _is_open(read) and fleet.worker(1).greeted


# --- a worker's side of the channel ---------------------------------------------------------


class _Listening:
    def __init__(self) -> None:
        self.stopped = False

    def stopListening(self) -> None:
        self.stopped = True


class _WorkerReactor(FakeReactor):
    """What a worker's link asks of its reactor: adopting a listening socket, stopping."""

    def __init__(self) -> None:
        super().__init__()
        self.adopted: list[tuple[int, int, Any, bool]] = []  # fd, family, factory, fd open when adopted
        self.running = True
        self.stops = 0

    def adoptStreamPort(self, fd: int, family: int, factory: Any) -> _Listening:
        self.adopted.append((fd, family, factory, _is_open(fd)))
        return _Listening()

    def stop(self) -> None:
        self.stops += 1


class _Link:
    """A ``WorkerLink`` on a fake reactor with its channel on a recording transport."""

    def __init__(self) -> None:
        self.reactor = _WorkerReactor()
        self.factories: list[Node] = []
        self.released: list[str] = []
        self.link = WorkerLink(2, self.reactor, self._factory_for, lambda: defer.succeed(b"rmq_total 3.0\n"))
        self.link.released = self.released.append
        self.channel = RecordingTransport()
        self.link.control.makeConnection(self.channel)

    def _factory_for(self, node: Node) -> Any:
        self.factories.append(node)
        return ("factory", node)

    def receive(self, message: Message, fds: Sequence[int] = ()) -> None:
        for fd in fds:
            self.link.control.fileDescriptorReceived(fd)
        self.link.control.dataReceived(_line({**message, "fds": len(fds)}))


def _listen_message(port: int, listen_on: int) -> Message:
    return {"op": "listen", "name": "broker-a", "id": 0, "upstream": "10.1.0.1:10911", "port": port, "fast": port - 2,
            "address": f"127.0.0.1:{port}", "family": int(socket.AF_INET), "listen_on": listen_on}  # fmt: skip


def test_listen_adopts_the_socket_and_closes_the_worker_s_copy() -> None:
    end = _Link()
    sock = socket.socket()
    try:
        fd = os.dup(sock.fileno())
        end.receive(_listen_message(20003, 20003), [fd])
        ((adopted_fd, family, factory, was_open),) = end.reactor.adopted
        assert (adopted_fd, family, was_open) == (fd, socket.AF_INET, True)
        assert not _is_open(fd)  # the reactor has its own copy
        node = end.link.nodes[("broker-a", 0)]
        assert factory == ("factory", node)
        assert (node.upstream, node.port, node.fast_port, node.address) == ("10.1.0.1:10911", 20003, 20001,
                                                                             "127.0.0.1:20003")  # fmt: skip
    finally:
        sock.close()


def test_the_fast_port_s_listen_serves_the_same_node() -> None:
    end = _Link()
    for listen_on in (20003, 20001):
        end.receive(_listen_message(20003, listen_on), [os.dup(0)])
    (node,) = end.link.nodes.values()
    assert end.factories == [node, node] and len(node.listening) == 2


def test_stop_listening_stops_every_adopted_port() -> None:
    end = _Link()
    listenings: list[_Listening] = []
    original = end.reactor.adoptStreamPort

    def adopt(fd: int, family: int, factory: Any) -> _Listening:
        listening = original(fd, family, factory)
        listenings.append(listening)
        return listening

    end.reactor.adoptStreamPort = adopt  # type: ignore[method-assign]
    end.receive(_listen_message(20003, 20003), [os.dup(0)])
    end.receive(_listen_message(20003, 20001), [os.dup(0)])
    end.link.stop_listening()
    assert len(listenings) == 2 and all(listening.stopped for listening in listenings)


def test_moved_updates_the_node_s_upstream_and_an_unknown_node_is_ignored() -> None:
    end = _Link()
    end.receive(_listen_message(20003, 20003), [os.dup(0)])
    end.receive({"op": "moved", "name": "broker-a", "id": 0, "upstream": "10.1.0.7:10911"})
    end.receive({"op": "moved", "name": "broker-z", "id": 0, "upstream": "10.1.0.8:10911"})
    assert end.link.nodes[("broker-a", 0)].upstream == "10.1.0.7:10911" and len(end.link.nodes) == 1


def test_scrape_is_answered_with_the_worker_s_exposition_under_the_same_number() -> None:
    end = _Link()
    end.receive({"op": "scrape", "n": 17})
    assert end.channel.messages() == [{"op": "metrics", "n": 17, "fds": 0, "bytes": 14, "payload": b"rmq_total 3.0\n"}]


def test_release_is_handed_to_the_lock_handoff() -> None:
    end = _Link()
    end.receive({"op": "release", "client": "10.0.0.5@1#1"})
    assert end.released == ["10.0.0.5@1#1"]


def test_live_and_gone_go_to_the_supervisor() -> None:
    end = _Link()
    end.link.live("c1")
    end.link.gone("c1")
    assert end.channel.messages() == [{"op": "live", "client": "c1", "fds": 0}, {"op": "gone", "client": "c1", "fds": 0}]


def test_an_unknown_message_s_descriptors_are_closed(logged: list[dict]) -> None:
    end = _Link()
    read, write = os.pipe()
    end.receive({"op": "frobnicate"}, [read, write])
    assert not _is_open(read) and not _is_open(write)
    assert end.reactor.adopted == [] and _said(logged, "unknown message")


def test_a_worker_whose_supervisor_is_gone_stops_and_one_that_closes_its_channel_does_not() -> None:
    end = _Link()
    end.link.control.connectionLost(None)
    end.reactor.advance(0)
    assert end.reactor.stops == 1
    closing = _Link()
    closing.link.close()
    assert closing.channel.disconnecting
    closing.link.control.connectionLost(None)
    closing.reactor.advance(0)
    assert closing.reactor.stops == 0



def test_a_stopped_node_port_refuses_connects_though_a_worker_still_holds_its_socket() -> None:
    """The supervisor's stop ends the listen for the copies its workers hold too: a client that
    connects while the workers drain is refused at once, not queued unaccepted and reset later."""
    sock = listening_socket("127.0.0.1", 0, 16)
    port = sock.getsockname()[1]
    worker_copy = socket.socket(fileno=os.dup(sock.fileno()))
    try:
        _BoundPort(sock).stopListening()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
    finally:
        worker_copy.close()
