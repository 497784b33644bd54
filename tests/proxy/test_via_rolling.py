"""A rolling restart of two proxies in front of the session's shared 4.9.7 cluster, with real Java
clients given both proxies as their name servers ("a;b"), as docs/operations.md "Rolling restarts"
tells operators to run them: SIGTERM the first proxy (it drains and exits 0), traffic goes on
through the second; start the first again and SIGTERM the second, traffic goes on through the
first; start the second again. Nothing acknowledged is lost, and each proxy drains (every process
logs it) and exits 0 well within its drain timeout.

What a restart costs a client is its own route poll: a 4.9.8 client moves to the next name server
of its list only when a request to the current one fails, and it asks for routes only every
``pollNameServerInterval``; a send failure neither refreshes its routes nor moves it. So a
producer whose name server is the stopped proxy keeps sending to that proxy's broker ports, whose
addresses every broker of its routes has, until its next poll: each send fails on all three
tries ("Send [3] times, still failed ... connect to <stopped proxy's port> failed") and the
scenario tries the next 100 ms later. Its log then shows "new name server is chosen. OLD: <stopped>
, NEW: <other>" and the routes change to the other proxy's ports; sends succeed from the next one.
A send written just as the stopping proxy resets its connection is not failed by the 4.9.8 client
(its sync requests are not failed on a channel's close): it waits out its 3 s sendMsgTimeout.
Measured with 1 s polls over four runs: sends paused 0.25-0.75 s with 0-7 failed sends per stop,
or 3.0 s with one when a send met the reset; the consumer's receives paused 2.3-3.0 s (a failed
pull is retried 3 s later); the stops took 0.07-0.2 s. With the client's default 30 s poll that window is up to 30 s of failed
sends: give clients behind proxies a short ``pollNameServerInterval``.

There is no reference to run this against: Apache RocketMQ 4.9.x has no proxy for the remoting
protocol (its 5.x proxy is tests/interop/apache_proxy.py, for 5.x clients), and the closest
reference case, a broker restart under traffic, is covered by test_via_faults.py and the
interop restart scenarios.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from codec.codes import ResponseCode
from tests.interop.apache_cluster import ApacheCluster
from tests.interop.scenario_checks import explain, no_error, traffic_across
from tests.interop.scenario_runner import ScenarioProgram, unique_name
from tests.interop.server import RunningProxy
from tests.interop.wire import WireClient

from .proxied import ONLY_49

pytestmark = pytest.mark.apache_cluster("4.9.7")

#: The clients' heartbeat, route poll and rebalance interval: a client leaves a stopped proxy at
#: its next route poll, so this bounds the pause (the client's defaults: 30 s, 30 s, 20 s).
CLIENT_INTERVAL_MS = 1000
#: The result fields a failure message shows.
FIELDS = ("sent_ok", "send_not_ok", "send_not_ok_statuses", "send_failed", "send_failures", "received", "distinct",
          "duplicates", "missing", "missing_keys", "drain_ms")  # fmt: skip
DRAINED = b"stopping: drained in"
#: The proxies' shutdownDrainTimeoutMillis, their default: a stop that waits it out left answers unsent.
DRAIN_TIMEOUT_S = 10.0
#: The most sends one stop may fail: one per 100 ms (the scenario's wait after a failed send) until
#: the producer's next route poll, and one for the send under way.
FAILED_SENDS_PER_STOP = CLIENT_INTERVAL_MS // 100 + 1
#: The longest a stop may pause the producer's sends: one route poll, a second of slack for the
#: machine's load, and the 3 s sendMsgTimeout of a send written just as its connection was reset by
#: the stopping proxy (a 4.9.8 sync request is not failed when its channel closes; it times out).
SEND_PAUSE_S = CLIENT_INTERVAL_MS / 1000 + 1.0 + 3.0
#: What a failed send try in the client log may say: a stopped proxy's port refused or reset it,
#: or the cluster's own flow control on a loaded machine (the Apache broker's "[TIMEOUT_CLEAN_QUEUE]
#: broker busy", SYSTEM_BUSY, which the client does not retry), which the proxy relays as is.
RESTART_OR_BUSY = re.compile(r"RemotingConnectException: connect to 127\.0\.0\.1:\d+ failed"
                             r"|RemotingSendRequestException: send request to <127\.0\.0\.1:\d+> failed"
                             r"|RemotingTimeoutException: wait response on the channel <127\.0\.0\.1:\d+> timeout"
                             r"|CODE: 2  DESC: \[(TIMEOUT_CLEAN_QUEUE|PCBUSY_CLEAN_QUEUE)\]broker busy")  # fmt: skip


class ProxyPair:
    """Two proxies in front of one cluster, to clients one name-server list "a;b" (closes both)."""

    name = "two rmqproxy proxies"

    def __init__(self, cluster: ApacheCluster) -> None:
        self.cluster = cluster
        self.a = RunningProxy(cluster.namesrv_addr)
        try:
            self.b = RunningProxy(cluster.namesrv_addr)
        except BaseException:
            self.a.close()
            raise

    @property
    def namesrv(self) -> str:
        return f"{self.a.namesrv};{self.b.namesrv}"

    def log_tail(self, chars: int = 4000) -> str:
        return f"--- proxy a ---\n{self.a.log_tail(chars)}\n--- proxy b ---\n{self.b.log_tail(chars)}"

    def close(self) -> None:
        try:
            self.a.close()
        finally:
            self.b.close()


@pytest.fixture(scope="module")
def proxies(apache_clusters: Callable[[str], ApacheCluster]) -> Iterator[ProxyPair]:
    pair = ProxyPair(apache_clusters("4.9.7"))
    try:
        yield pair
    finally:
        pair.close()


class Stops:
    """SIGTERMs of the proxies, each timed, with what the proxy logged of its drain."""

    def __init__(self) -> None:
        self.at: list[float] = []  # time.monotonic() of each SIGTERM
        self.took: list[float] = []  # seconds from SIGTERM to exit 0
        self.drained: list[list[str]] = []  # the drain lines each stop logged
        self.processes: list[int] = []  # the proxy's processes (supervisor and workers) at each stop

    def stop(self, proxy: RunningProxy) -> None:
        """SIGTERM ``proxy`` and wait for its exit 0 (``RunningProxy.stop`` raises otherwise)."""
        self.processes.append(len(proxy.pids))
        offset = proxy.log_path.stat().st_size
        self.at.append(time.monotonic())
        proxy.stop()
        self.took.append(time.monotonic() - self.at[-1])
        with open(proxy.log_path, "rb") as log:
            log.seek(offset)
            self.drained.append([line.decode(errors="replace").strip() for line in log if DRAINED in line])


def _failed_tries(log_dir: str) -> list[str]:
    """What each failed send try said, as the Java client logged it ("sendKernelImpl exception",
    then the exception's first line)."""
    tries = []
    for path in sorted(Path(log_dir).rglob("rocketmq_client*.log")):
        for entry in re.split(r"\n(?=\d{4}-\d\d-\d\d )", path.read_text(errors="replace")):
            if "sendKernelImpl exception" in entry:
                tries.append(" / ".join(entry.splitlines()[1:2]))
    return tries


def _grew(timeline: list[tuple[float, dict[str, int]]], key: str, start: float, end: float) -> int:
    """How much ``key`` of the client's progress grew between ``start`` and ``end``."""
    def at(when: float) -> int:
        return max((c.get(key, 0) for t, c in timeline if t <= when), default=0)

    return at(end) - at(start)


def _pause(timeline: list[tuple[float, dict[str, int]]], key: str, start: float, end: float) -> float:
    """The longest time ``key`` of the client's progress stood still between ``start`` and ``end``
    (to the progress lines' 250 ms)."""
    grew = [t for (t, c), (_, before) in zip(timeline[1:], timeline) if c.get(key, 0) > before.get(key, 0)]
    last = max((t for t in grew if t <= start), default=start)
    longest = 0.0
    for t in [t for t in grew if start < t <= end]:
        longest, last = max(longest, t - last), t
    return longest


@ONLY_49
def test_a_rolling_restart_of_two_proxies(program: ScenarioProgram, proxies: ProxyPair) -> None:
    a, b = proxies.a, proxies.b
    topic = unique_name("ViaRolling", program.line)
    for addr in proxies.cluster.broker_addrs.values():  # on both brokers from the start (test_via_faults)
        with WireClient(addr) as wire:
            assert wire.create_topic(topic, 4).code == ResponseCode.SUCCESS
    stops, begun = Stops(), []

    def stop_a() -> None:
        begun.append(time.monotonic())
        stops.stop(a)

    def restart_a_stop_b() -> None:
        begun.append(time.monotonic())
        a.start()
        stops.stop(b)

    def restart_b() -> None:
        begun.append(time.monotonic())
        b.start()

    marks, r = traffic_across(
        program, proxies.namesrv, topic, stop_a, restart_a_stop_b, restart_b, after=100, timeout=60,
        heartbeat_ms=CLIENT_INTERVAL_MS, poll_namesrv_ms=CLIENT_INTERVAL_MS, rebalance_interval_ms=CLIENT_INTERVAL_MS,
    )  # fmt: skip
    no_error(r, proxies)
    timeline, ends = r["_timeline"], begun[1:]  # each stop's pause: until the next event, once traffic went on
    sends = [_pause(timeline, "sent", at, end) for at, end in zip(stops.at, ends)]
    receives = [_pause(timeline, "received", at, end) for at, end in zip(stops.at, ends)]
    failed = [_grew(timeline, "failed", at, end) for at, end in zip(stops.at, ends)]
    tries = _failed_tries(r["_log_dir"])
    print(f"rolling restart: marks={marks} sent_ok={r['sent_ok']} failed={r['send_failed']} {r['send_failures']} "
          f"received={r['received']} duplicates={r['duplicates']} stops took {[f'{s:.2f}' for s in stops.took]} s, "
          f"sends paused {[f'{s:.2f}' for s in sends]} s (failed {failed}), receives {[f'{s:.2f}' for s in receives]} s",
          *stops.drained, sep="\n  ")  # fmt: skip
    assert r["missing"] == 0, f"{r['missing']} acknowledged messages never arrived\n" + explain(r, proxies, *FIELDS)
    assert all(m["sent"] < n["sent"] for m, n in zip(marks, marks[1:])), explain(r, proxies, *FIELDS)
    for processes, drained in zip(stops.processes, stops.drained):
        assert len(drained) == processes, proxies.log_tail()  # the supervisor and every worker drained
    costs = explain(r, proxies, *FIELDS) + f"\nstops took {stops.took} s, sends paused {sends} s, failed {failed}"
    assert all(took < DRAIN_TIMEOUT_S for took in stops.took), costs  # nothing was left in flight to wait for
    assert all(n <= FAILED_SENDS_PER_STOP for n in failed) and all(p <= SEND_PAUSE_S for p in sends), costs
    assert [t for t in tries if not RESTART_OR_BUSY.search(t)] == [], costs  # no error from a draining proxy
