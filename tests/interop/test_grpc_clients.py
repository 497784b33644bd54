"""RocketMQ 5 gRPC clients (the official rocketmq-client-java 5.0.8, ``grpc_client/``) against
``rmqproxy serve``'s gRPC port and against the reference: Apache RocketMQ 5.3.3's name server and
proxy in local mode (``apache_proxy.ApacheProxy``, its broker embedded). Every message sent is
consumed (in order where asked), unacked messages come back with their attempt counted, past the
group's attempts they go to the DLQ, delayed messages arrive at their time, transactions end as
decided (open ones through the producer's check-back), and TLS and plain clients share the port.

Where the reference differs, each test says so and checks each its own way:

- an empty receive with a 3 s await: rmqproxy answers at 3 s; the reference raises every wait to
  at least 5 s (``grpcClientConsumerMinLongPollingTimeoutMillis``);
- a receive's invisible duration: rmqproxy takes 1 s and up; the reference's minimum is 10 s, so
  the redelivery tests use 2 s here and 10 s there;
- an unacked message is back within 50 ms of its invisibility on rmqproxy (a waiting receive is
  woken); on the reference it waits for its revive scan and the current long poll (12-15 s after
  a 10 s invisibility);
- a delayed message: within 10 ms of its time on rmqproxy; the reference's timer works in 1 s
  slots (0.3-1.3 s late).

Each prints its figures (``-s`` or ``-rP``). Against the reference the tests' runs go side by side
(``side_by_side.py``): they are mostly its waits.
"""

from __future__ import annotations

import re
import statistics
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from codec.codes import RequestCode as C
from tests.needs import require_java_tools

from .apache_proxy import ApacheProxy, ReferenceAdmin
from .grpc_runner import GrpcClientProgram
from .scenario_runner import unique_name
from .side_by_side import Concurrent
from .server import RunningServer
from .wire import WireClient

#: The tests run against both targets; on the reference side by side (its runs are mostly waits).
SIDE = Concurrent()
#: The transaction settings both targets run with: quick check-backs.
TRANSACTION_CONF = {"transactionCheckInterval": "1000", "transactionTimeOut": "2000"}


class Target:
    """A server the gRPC clients talk to: its name, gRPC endpoint, remoting broker address, and a
    way to make topics (with a message type) and groups."""

    def __init__(self, name: str, endpoint: str, namesrv: str, broker_addr: str, admin: ReferenceAdmin,
                 server: Any) -> None:  # fmt: skip
        self.name, self.endpoint, self.namesrv, self.broker_addr = name, endpoint, namesrv, broker_addr
        self.admin = admin
        self.server = server

    @property
    def reference(self) -> bool:
        return self.name != "rmqproxy"

    def create(self, topics: Mapping[str, str] | Sequence[tuple[str, str, int]] = (),
               groups: Sequence[str | tuple[str, bool, int]] = ()) -> None:  # fmt: skip
        self.admin.create(self.namesrv, self.broker_addr, topics, groups)

    def log_tail(self) -> str:
        return self.server.log_tail()


@pytest.fixture(scope="module", params=["rmqproxy", "apache-proxy-5.3.3"])
def target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    require_java_tools("the gRPC client interop tests")
    if request.param == "rmqproxy":
        with RunningServer(grpc=True, broker_conf=TRANSACTION_CONF) as server:
            admin = ReferenceAdmin(tmp_path_factory.mktemp("grpc-admin"))
            yield Target("rmqproxy", f"127.0.0.1:{server.grpc_port}", server.namesrv, server.broker_addr, admin, server)
        return
    # transactionOpBatchInterval below transactionTimeOut, or the reference asks about ended transactions
    with ApacheProxy(broker_conf={**TRANSACTION_CONF, "transactionOpBatchInterval": "200"}) as proxy:
        yield Target(proxy.name, proxy.endpoint, proxy.namesrv, proxy.broker_addr, proxy.admin, proxy)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> GrpcClientProgram:
    require_java_tools("the gRPC client program")
    return GrpcClientProgram(log_root=tmp_path_factory.mktemp("grpc-client"))


reference_runs = SIDE.fixture()


def _ok(result: dict[str, Any], target: Target) -> dict[str, Any]:
    """The result, after checking it carries no scenario-level error."""
    assert "error" not in result, (f"{target.name}: {result['error']} (client log: "
                                   f"{Path(result['_log_dir']) / 'rocketmq_client.log'})\n{target.log_tail()}")  # fmt: skip
    return result


def _spread(values: list[int]) -> str:
    return f"min {min(values)} median {statistics.median(values):.0f} max {max(values)} ms (n={len(values)})"


def _names(kind: str) -> tuple[str, str]:
    return unique_name(f"grpc_{kind}", "5"), unique_name(f"grpc_{kind}_g", "5")


@SIDE.test(seconds=9)
def test_normal_messages_are_all_consumed_and_acked(target: Target, client: GrpcClientProgram) -> None:
    topic, group = _names("normal")
    target.create(topics={topic: "NORMAL"}, groups=[group])
    sent = _ok(client.run("send", endpoint=target.endpoint, topic=topic, count=20), target)
    assert sent["sent_ok"] == 20 and sent["send_errors"] == 0
    got = _ok(client.run("simple-consume", endpoint=target.endpoint, topic=topic, group=group, count=20), target)
    assert got["acked"] == 20
    assert sorted(m["body"] for m in got["messages"]) == sorted(f"{topic}-{i}" for i in range(20))
    assert {m["message_id"] for m in got["messages"]} == {s["message_id"] for s in sent["sent"]}
    assert all(m["tag"] == "TagA" and m["delivery_attempt"] == 1 for m in got["messages"])
    assert all(m["keys"] == [f"k{m['body'].rsplit('-', 1)[1]}"] for m in got["messages"])
    print(f"\n{target.name} normal: send {_spread([s['elapsed_ms'] for s in sent['sent']])}; "
          f"{len(got['receives'])} receive calls for 20 messages")


@SIDE.test(seconds=20)
def test_an_empty_receive_comes_back_at_its_await(target: Target, client: GrpcClientProgram) -> None:
    topic, group = _names("empty")
    target.create(topics={topic: "NORMAL"}, groups=[group])
    result = _ok(client.run("receive-empty", endpoint=target.endpoint, topic=topic, group=group, await_ms=3000,
                            repeat=3), target)  # fmt: skip
    elapsed = [r["elapsed_ms"] for r in result["receives"]]
    assert all(r["n"] == 0 and "error" not in r for r in result["receives"]), result["receives"]
    if target.reference:  # raised to its 5 s floor
        assert all(4700 <= e <= 6500 for e in elapsed), elapsed
    else:
        assert all(2990 <= e <= 3300 for e in elapsed), elapsed
    print(f"\n{target.name} empty receive, await 3000 ms: {elapsed} ms")


@SIDE.test(seconds=23)
def test_an_unacked_message_comes_back_with_attempt_two(target: Target, client: GrpcClientProgram) -> None:
    topic, group = _names("nack")
    target.create(topics={topic: "NORMAL"}, groups=[group])
    invisible_ms = 10_000 if target.reference else 2_000  # the reference's minimum is 10 s
    _ok(client.run("send", endpoint=target.endpoint, topic=topic, count=3), target)
    got = _ok(client.run("simple-consume", endpoint=target.endpoint, topic=topic, group=group, count=3, nack_first=True,
                         invisible_ms=invisible_ms, idle_ms=invisible_ms + 10_000), target)  # fmt: skip
    assert got["acked"] == 3
    by_id: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for m in got["messages"]:
        by_id[m["message_id"]].append(m)
    delays = []
    for deliveries in by_id.values():
        assert [(d["delivery_attempt"], d["action"]) for d in deliveries] == [(1, "none"), (2, "ack")]
        delays.append(deliveries[1]["received_ms"] - deliveries[0]["received_ms"])
    slack = 6000 if target.reference else 500
    assert all(invisible_ms - 200 <= d <= invisible_ms + slack for d in delays), delays
    print(f"\n{target.name} redelivery after an invisible {invisible_ms} ms: {_spread(delays)}")


@SIDE.test(seconds=13)
def test_change_invisible_duration_brings_a_message_back_sooner(target: Target, client: GrpcClientProgram) -> None:
    topic, group = _names("chinv")
    target.create(topics={topic: "NORMAL"}, groups=[group])
    _ok(client.run("send", endpoint=target.endpoint, topic=topic, count=2), target)
    got = _ok(client.run("simple-consume", endpoint=target.endpoint, topic=topic, group=group, count=2,
                         change_invisible_ms=2000, invisible_ms=30_000, idle_ms=15_000), target)  # fmt: skip
    assert got["acked"] == 2 and all("action_error" not in m for m in got["messages"])
    firsts = [m for m in got["messages"] if m["action"] == "change_invisible"]
    seconds = {m["message_id"]: m for m in got["messages"] if m["action"] == "ack"}
    assert len(firsts) == 2 and all(seconds[m["message_id"]]["delivery_attempt"] == 2 for m in firsts)
    delays = [seconds[m["message_id"]]["received_ms"] - m["change_ms"] for m in firsts]
    # the reference returns it by its revive scan and the current long poll: 5-10 s after a 2 s change
    assert all(1500 <= d <= (20_000 if target.reference else 2600) for d in delays), delays
    print(f"\n{target.name} back after changeInvisibleDuration(2000): {_spread(delays)}")


@SIDE.test(seconds=40)
def test_past_its_attempts_a_message_goes_to_the_dead_letter_queue(target: Target, client: GrpcClientProgram) -> None:
    topic, group = _names("dlq")
    target.create(topics={topic: "NORMAL"}, groups=[(group, False, 1)])  # two attempts in all
    invisible_ms = 10_000 if target.reference else 2_000
    _ok(client.run("send", endpoint=target.endpoint, topic=topic, count=2), target)
    got = _ok(client.run("simple-consume", endpoint=target.endpoint, topic=topic, group=group, count=99, never_ack=True,
                         invisible_ms=invisible_ms, idle_ms=invisible_ms + (8_000 if target.reference else 3_000)), target)  # fmt: skip
    attempts = sorted(m["delivery_attempt"] for m in got["messages"])
    assert attempts == [1, 1, 2, 2], attempts
    with WireClient(target.broker_addr) as wire:
        dlq = int(wire.call(C.GET_MAX_OFFSET, topic=f"%DLQ%{group}", queue_id=0).ext_fields["offset"])
    assert dlq == 2, f"{target.name}: {dlq} messages in %DLQ%{group}"


@SIDE.test(seconds=12)
def test_fifo_message_groups_are_consumed_in_order_by_a_push_consumer(target: Target,
                                                                       client: GrpcClientProgram) -> None:  # fmt: skip
    topic, group = _names("fifo")
    target.create(topics={topic: "FIFO"}, groups=[(group, True, 16)])
    sent = _ok(client.run("send", endpoint=target.endpoint, topic=topic, kind="fifo", count=40, groups=4), target)
    assert sent["sent_ok"] == 40
    got = _ok(client.run("push-consume", endpoint=target.endpoint, topic=topic, group=group, count=40,
                         idle_ms=15_000), target)  # fmt: skip
    assert got["succeeded"] == 40 and got["deliveries"] == 40
    order: dict[str, list[int]] = defaultdict(list)
    for m in got["consumed"]:
        order[m["message_group"]].append(int(m["body"].rsplit("-", 1)[1]))
    assert set(order) == {f"g{k}" for k in range(4)}
    for name, seq in order.items():
        assert seq == [i for i in range(40) if f"g{i % 4}" == name], (name, seq)


@SIDE.test(seconds=31)
def test_a_push_consumers_failure_is_redelivered(target: Target, client: GrpcClientProgram) -> None:
    topic, group = _names("pushfail")
    target.create(topics={topic: "NORMAL"}, groups=[group])
    _ok(client.run("send", endpoint=target.endpoint, topic=topic, count=3), target)
    got = _ok(client.run("push-consume", endpoint=target.endpoint, topic=topic, group=group, count=3, fail_first=True,
                         idle_ms=40_000), target)  # fmt: skip
    assert got["succeeded"] == 3 and got["deliveries"] == 6
    by_id: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for m in got["consumed"]:
        by_id[m["message_id"]].append(m)
    delays = []
    for deliveries in by_id.values():
        assert [(d["delivery_attempt"], d["result"]) for d in deliveries] == [(1, "FAILURE"), (2, "SUCCESS")]
        delays.append(deliveries[1]["received_ms"] - deliveries[0]["returned_ms"])
    print(f"\n{target.name} push FAILURE redelivered after {_spread(delays)}")


@SIDE.test(seconds=7)
def test_tls_and_plain_clients_share_the_port(target: Target, client: GrpcClientProgram) -> None:
    topic, group = _names("tls")
    target.create(topics={topic: "NORMAL"}, groups=[group])
    sent = _ok(client.run("send", endpoint=target.endpoint, topic=topic, count=2, tls=True), target)
    assert sent["tls"] is True and sent["sent_ok"] == 2
    got = _ok(client.run("simple-consume", endpoint=target.endpoint, topic=topic, group=group, count=2, tls=False), target)
    assert got["acked"] == 2


@SIDE.test(seconds=9)
def test_delayed_messages_arrive_at_their_time(target: Target, client: GrpcClientProgram) -> None:
    topic, group = _names("delay")
    target.create(topics={topic: "DELAY"}, groups=[group])
    sent = _ok(client.run("send", endpoint=target.endpoint, topic=topic, kind="delay", count=5, delay_ms=4000), target)
    assert sent["sent_ok"] == 5
    got = _ok(client.run("simple-consume", endpoint=target.endpoint, topic=topic, group=group, count=5,
                         idle_ms=15_000), target)  # fmt: skip
    assert got["acked"] == 5
    due = {s["message_id"]: s["deliver_at_ms"] for s in sent["sent"]}
    lateness = [m["received_ms"] - due[m["message_id"]] for m in got["messages"]]
    assert all(m["delivery_timestamp"] == due[m["message_id"]] for m in got["messages"])
    assert all(-100 <= late <= (3000 if target.reference else 200) for late in lateness), lateness
    print(f"\n{target.name} delay 4000 ms: received after the delivery time by {_spread(lateness)}")


@SIDE.test(seconds=10)
def test_transactions_end_as_decided(target: Target, client: GrpcClientProgram) -> None:
    topic, group = _names("tx")
    target.create(topics={topic: "TRANSACTION"}, groups=[group])
    sent = _ok(client.run("send", endpoint=target.endpoint, topic=topic, kind="transaction", count=6,
                          decisions="commit,rollback,unknown", check_wait_ms=30_000), target)  # fmt: skip
    assert sent["sent_ok"] == 6 and all("end_error" not in s for s in sent["sent"])
    assert sent["unknown_checked"] == sent["unknown_sent"] == 2
    unknown = {s["message_id"] for s in sent["sent"] if s["decision"] == "unknown"}
    assert {c["message_id"] for c in sent["checks"]} == unknown, "asked about an ended transaction"
    got = _ok(client.run("simple-consume", endpoint=target.endpoint, topic=topic, group=group, count=4,
                         idle_ms=10_000), target)  # fmt: skip
    bodies = sorted(int(m["body"].rsplit("-", 1)[1]) for m in got["messages"])
    assert bodies == [0, 2, 3, 5], bodies  # commit (0, 3) and unknown-then-COMMIT (2, 5); never rollback (1, 4)


GRPC_ACL = """accounts:
  - accessKey: grpc-app
    secretKey: grpc-app-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - {topic}=PUB|SUB
"""


def test_acl_accounts_sign_grpc_clients(client: GrpcClientProgram, tmp_path: Path) -> None:
    """rmqproxy only: the 5.3.3 reference authenticates gRPC clients with ACL 2.0 (users and
    policies made by its admin tools), not the plain ACL accounts rmqproxy keeps for both protocols."""
    topic, group = _names("acl")
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(GRPC_ACL.format(topic=topic))
    with RunningServer(grpc=True, broker_conf={"autoCreateTopicEnable": "false"}) as server:
        target = Target("rmqproxy", f"127.0.0.1:{server.grpc_port}", server.namesrv, server.broker_addr,
                        ReferenceAdmin(tmp_path / "admin"), server)  # fmt: skip
        target.create(topics={topic: "NORMAL"}, groups=[group])  # before ACL is on: the admin tool does not sign
        server.stop()
        assert server.conf_path is not None
        with server.conf_path.open("a") as conf:
            conf.write(f"aclEnable=true\nrocketmqHome={home}\n")
        server.start()
        good = {"access_key": "grpc-app", "secret_key": "grpc-app-secret"}
        sent = _ok(client.run("send", endpoint=target.endpoint, topic=topic, count=3, **good), target)
        assert sent["sent_ok"] == 3
        got = _ok(client.run("simple-consume", endpoint=target.endpoint, topic=topic, group=group, count=3, **good),
                  target)  # fmt: skip
        assert got["acked"] == 3
        bad = client.run("send", endpoint=target.endpoint, topic=topic, count=1, access_key="grpc-app",
                         secret_key="not-the-secret")  # fmt: skip
        assert "40100" in str(bad), bad


@SIDE.test(seconds=15)
def test_consumer_progress_shows_a_grpc_groups_real_lag(target: Target, client: GrpcClientProgram) -> None:
    """mqadmin consumerProgress (5.3.3 tools) on a gRPC group with 3 of 5 messages acked: rmqproxy
    shows the 2 not acked as its lag. The reference's answer is printed: its consumerProgress of a
    pop group fails looking up a route (its console shows -1 for such groups, rocketmq-dashboard #381)."""
    topic, group = _names("lag")
    target.create(topics=[(topic, "NORMAL", 1)], groups=[group])
    _ok(client.run("send", endpoint=target.endpoint, topic=topic, count=5), target)
    got = _ok(client.run("simple-consume", endpoint=target.endpoint, topic=topic, group=group, count=3, max=1,
                         idle_ms=1000), target)  # fmt: skip
    assert got["acked"] == 3
    time.sleep(1.5)  # the committed offset follows acks within a second
    out = target.admin.mqadmin("consumerProgress", "-g", group, namesrv=target.namesrv)
    rows = [line.split() for line in out.splitlines() if line.startswith(topic + " ")]
    said = [line for line in out.splitlines() if "Diff Total" in line or "Exception" in line][:2]
    print(f"\n{target.name} consumerProgress of a gRPC group, 3 of 5 acked: {said}")
    if not target.reference:
        assert len(rows) == 1, out
        assert (int(rows[0][3]), int(rows[0][4])) == (5, 3), out  # broker offset, consumer offset
        assert re.search(r"Diff Total:\s*2\b", out), out
