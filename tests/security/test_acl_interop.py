"""Plain ACL (``aclEnable=true``) proved with real Java clients against rmqproxy AND the reference
Apache RocketMQ 4.9.7 broker, both reading the same ``plain_acl.yml`` (issue 29).

Why: tests/security/test_acl.py checks rmqproxy/broker/acl.py against what we believe the reference does;
this module checks that belief against the reference itself, in the same run, with the clients
users run (4.9.8 and 5.5.0 ``AclClientRPCHook``, 4.9.8 mqadmin signing with ``conf/tools.yml``)
and with raw frames (``wire.roundtrip``) where an exact code and remark, or a chosen source
address, is the point. Every refusal must be code 1 (SYSTEM_ERROR) on both with the same
``AclException`` message: rmqproxy's remark is exactly ``org.apache.rocketmq.acl.common.AclException:
<message>``, the reference's appends ``, <the Java frame that threw>``.

What is checked:

1. the right keys: a producer (sync, async, oneway, batch sends) and a push consumer of each
   client line send and consume everything, with no refusal in the client logs;
2. refusals: a wrong secret, no signature at all, an unknown AccessKey, a topic that is DENY or
   SUB-only, a consumer group that is DENY (a real push consumer gets nothing; pulls, heartbeats,
   offset commits, send-backs, ... on the wire), admin codes from a non-admin account (mqadmin
   updateTopic with a non-admin tools.yml, and raw requests), and an account whitelist
   (``whiteRemoteAddress: 127.0.0.1`` skips the signature from 127.0.0.1, not from 127.0.0.2) and
   the global whitelist (127.0.0.3 needs no account);
3. mqadmin with an admin account's tools.yml creates a topic and lists and routes it;
4. a changed ``plain_acl.yml`` takes effect without a restart (rmqproxy polls every 5 s, the
   reference watches the file): a topic granted, the same send passes within 15 s.

Both servers are started once for the module, side by side (``servers``), and every step runs
against both, concurrently: ``servers_fixture`` would start the reference once per client line.

Where rmqproxy and the reference differ (each asserted per server):

- SEND_BATCH_MESSAGE (320): 4.9.7 checks no permission for it, so a batch to a DENY topic is
  stored there; rmqproxy checks it as a send (PUB), as 5.x does, and refuses it;
- GET_BROKER_CLUSTER_ACL_INFO (52): 4.9.7 answers any signed account; rmqproxy wants an admin (5.x);
- DELETE_TOPIC_IN_NAMESRV (216): the reference name server has no ACL, so anyone may send it;
  rmqproxy, one port for both roles, wants an admin account;
- an unsigned route request for ``%RETRY%<group>``: the reference name server (no ACL) answers
  17 (no route) and creates nothing; rmqproxy's name-server role would create that retry topic
  (so that a new consumer's retry queue is assigned at once), so there it is a write and needs a
  signature and the group's SUB: unsigned, it is refused and creates nothing either.
"""

from __future__ import annotations

import base64
import concurrent.futures
import hashlib
import hmac
import os
import re
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from codec.bodies import ConsumerData, HeartbeatData, TopicList, build_subscription
from codec.codes import RequestCode as C
from codec.codes import ResponseCode as R
from codec.command import RemotingCommand
from codec.headers import REQUEST_HEADERS
from rmqproxy.broker import acl
from tests.interop.conftest import program, scenario_line  # noqa: F401 (fixtures)
from tests.interop.scenario_checks import assert_all_received, explain, no_error, start_server
from tests.interop.scenario_runner import ScenarioProgram, unique_name
from tests.interop.server import ScenarioServer
from tests.interop.wire import roundtrip
from tests.needs import require_java_tools

pytestmark = pytest.mark.interop

ONLY_49 = pytest.mark.parametrize("scenario_line", ["4.9"], indirect=True, ids=["rocketmq-4.9.8"])

ADMIN = ("aclAdminKey", "aclAdminSecret")
USER = ("aclUserKey", "aclUserSecret")
LOCAL = ("aclLocalKey", "aclLocalSecret")  # white-listed from 127.0.0.1
WRONG_SECRET = "notTheSecret42"
GLOBAL_WHITE = "127.0.0.3"
OUTSIDE = "127.0.0.2"  # on no whitelist

ACL_YAML = f"""\
globalWhiteRemoteAddresses:
  - {GLOBAL_WHITE}
accounts:
  - accessKey: {ADMIN[0]}
    secretKey: {ADMIN[1]}
    admin: true
  - accessKey: {USER[0]}
    secretKey: {USER[1]}
    admin: false
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
    topicPerms:
      - AclDenied=DENY
      - AclSubOnly=SUB
      - AclLater=DENY
    groupPerms:
      - AclDeniedGroup=DENY
  - accessKey: {LOCAL[0]}
    secretKey: {LOCAL[1]}
    whiteRemoteAddress: 127.0.0.1
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
"""
#: The reload test's change: AclLater granted to the user account.
GRANTED_YAML = ACL_YAML.replace("AclLater=DENY", "AclLater=PUB|SUB")
RELOAD_WITHIN_S = 15.0

EXCEPTION = "org.apache.rocketmq.acl.common.AclException: "
#: What the reference appends to the message: ", <class>.<method>(<File>.java:<line>)".
_REFERENCE_FRAME = re.compile(r", org\.apache\.rocketmq\.acl\.[\w.$]+\(\w+\.java:\d+\)$")
#: How a Java client shows a broker's refusal, 4.9 and 5.x alike: "CODE: 1  DESC: <remark> BROKER: <addr>"
#: (MQBrokerException) or "CODE: 1  DESC: <remark>" and a new line (MQClientException, e.g. mqadmin's).
_BROKER_ANSWER = re.compile(r"CODE: (\d+)\s+DESC: (.*?)(?= BROKER: |$)", re.MULTILINE)
NAMES = ("rmqproxy", "apache")

T = TypeVar("T")


class Target:
    """A server under test and the ``plain_acl.yml`` it reads."""

    def __init__(self, server: ScenarioServer, acl_file: Path) -> None:
        self.server = server
        self.acl_file = acl_file
        self.name = "apache" if server.name.startswith("apache") else "rmqproxy"

    @property
    def reference(self) -> bool:
        return self.name == "apache"


def _write_acl(path: Path, text: str) -> None:
    """Replace the file whole (a watcher never reads it half written)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _start(name: str, root: Path) -> Target:
    if name == "apache":
        workdir = root / "apache"
        acl_file = workdir / "home" / "conf" / "plain_acl.yml"  # ApacheBroker's ROCKETMQ_HOME is workdir/home
        acl_file.parent.mkdir(parents=True)
        acl_file.write_text(ACL_YAML)
        return Target(start_server("apache", broker_conf={"aclEnable": "true"}, workdir=workdir), acl_file)
    home = root / "rmqproxy-home"
    acl_file = home / "conf" / "plain_acl.yml"
    acl_file.parent.mkdir(parents=True)
    acl_file.write_text(ACL_YAML)
    conf = {"aclEnable": "true", "rocketmqHome": str(home)}
    return Target(start_server("rmqproxy", broker_conf=conf, workdir=root / "rmqproxy"), acl_file)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Target]]:
    """rmqproxy and the reference 4.9.7 broker, started side by side once, with the same ACL."""
    require_java_tools("the reference broker")
    root = tmp_path_factory.mktemp("acl-interop")
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        futures = {name: pool.submit(_start, name, root) for name in NAMES}
    started = {name: f.result() for name, f in futures.items() if f.exception() is None}
    try:
        for f in futures.values():
            f.result()  # the first failure to start, if any
        yield started
    finally:
        for target in started.values():
            target.server.close()


def on_both(servers: dict[str, Target], step: Callable[[Target], T]) -> dict[str, T]:
    """``step`` against each server at once (Java runs take seconds each)."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        futures = {name: pool.submit(step, servers[name]) for name in NAMES}
        return {name: f.result() for name, f in futures.items()}


# -- remarks ------------------------------------------------------------------------------------------


def acl_message(target: Target, remark: str | None) -> str:
    """The message of an AclException remark. rmqproxy's is exactly the exception name and the
    message; the reference's adds ", <frame>", which must be there (or the format changed)."""
    assert remark is not None and remark.startswith(EXCEPTION), f"{target.name}: not an AclException: {remark!r}"
    message = remark[len(EXCEPTION):]
    frame = _REFERENCE_FRAME.search(message)
    if target.reference:
        assert frame, f"the reference's remark has no stack frame at its end: {remark!r}"
        return message[: frame.start()]
    assert frame is None, f"rmqproxy's remark carries a Java frame: {remark!r}"
    return message


def broker_refusals(target: Target, text: str) -> list[tuple[int, str]]:
    """(code, message) of each broker refusal a Java client reported in ``text``; an AclException's
    message without the exception name and frame."""
    found = []
    for m in _BROKER_ANSWER.finditer(text):
        code, remark = int(m.group(1)), m.group(2)
        found.append((code, acl_message(target, remark) if remark.startswith(EXCEPTION) else remark))
    return found


def client_log_text(result: dict[str, Any]) -> str:
    """Everything the Java run wrote under its log directory (client logs, stderr)."""
    return "\n".join(p.read_text(errors="replace") for p in sorted(Path(result["_log_dir"]).rglob("*")) if p.is_file())


# -- raw frames ---------------------------------------------------------------------------------------


def signed(ext: dict[str, str], keys: tuple[str, str], body: bytes = b"") -> dict[str, str]:
    """``ext`` signed as AclClientRPCHook signs: AccessKey added, then Base64 HmacSHA1 (the secret
    as key) over every value in key order followed by the body (written here, not taken from rmqproxy)."""
    ext = {**ext, "AccessKey": keys[0]}
    content = "".join(value for _, value in sorted(ext.items())).encode() + body
    return {**ext, "Signature": base64.b64encode(hmac.new(keys[1].encode(), content, hashlib.sha1).digest()).decode()}


def call(addr: str, code: int, ext: dict[str, str], body: bytes = b"", *, source: str = "127.0.0.1") -> RemotingCommand:
    """One request on a fresh connection from ``source`` (any loopback address) to ``addr``."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10, source_address=(source, 0)) as sock:
        return roundtrip(sock, RemotingCommand(code=code, opaque=1, ext_fields=ext, body=body))


def header(code: int, **fields: Any) -> dict[str, str]:
    spec = REQUEST_HEADERS[code]
    return dict(spec.encode(spec.cls(**fields)))


def send_ext(topic: str, group: str = "AclWirePg") -> dict[str, str]:
    """A SEND_MESSAGE_V2 header (auto-creating ``topic``)."""
    return header(C.SEND_MESSAGE_V2, producer_group=group, topic=topic, default_topic="TBW102",
                  default_topic_queue_nums=4, queue_id=0, sys_flag=0, born_timestamp=1, flag=0, properties="")  # fmt: skip


def pull_ext(group: str, topic: str) -> dict[str, str]:
    return header(C.PULL_MESSAGE, consumer_group=group, topic=topic, queue_id=0, queue_offset=0, max_msg_nums=32,
                  sys_flag=0, commit_offset=0, suspend_timeout_millis=0, sub_version=0)  # fmt: skip


def heartbeat(group: str, topic: str) -> bytes:
    consumer = ConsumerData(group, "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_FIRST_OFFSET",
                            [build_subscription(topic, "*", 1)], False)  # fmt: skip
    return HeartbeatData("127.0.0.1@acl#1", [], [consumer]).to_json()


def assert_refused_alike(answers: dict[str, RemotingCommand], servers: dict[str, Target], message: str) -> None:
    """Code 1 from both, with ``message`` as the AclException's message."""
    seen = {name: (a.code, a.remark) for name, a in answers.items()}
    assert all(a.code == R.SYSTEM_ERROR for a in answers.values()), seen
    messages = {name: acl_message(servers[name], a.remark) for name, a in answers.items()}
    assert messages == {name: message for name in NAMES}, seen


# -- 1. the right keys ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sent(program: ScenarioProgram, servers: dict[str, Target],
         tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:  # fmt: skip
    """The send scenario signed by the user account: 40 messages (10 each sync, async, oneway,
    batch) to a fresh topic, on each server, once per client line."""
    topic = unique_name("AclOk", program.line)
    manifests = tmp_path_factory.mktemp("acl-manifests")

    def send(target: Target) -> dict[str, Any]:
        manifest = manifests / f"{target.name}.tsv"
        r = program.run("send", namesrv=target.server.namesrv, topic=topic, group=f"{topic}-pg", count=40,
                        manifest=manifest, access_key=USER[0], secret_key=USER[1])  # fmt: skip
        r["_manifest"] = str(manifest)
        return r

    return on_both(servers, send)


def test_signed_clients_send_and_push_consume_everything(
    program: ScenarioProgram, servers: dict[str, Target], sent: dict[str, dict[str, Any]]
) -> None:
    group = unique_name("AclCg", program.line)
    pushed = on_both(servers, lambda t: program.run(
        "push", namesrv=t.server.namesrv, manifest=sent[t.name]["_manifest"], group=group, timeout_ms=60000,
        access_key=USER[0], secret_key=USER[1]))  # fmt: skip
    for name, target in servers.items():
        s, p = sent[name], pushed[name]
        no_error(s, target.server)
        assert s["access_key"] == USER[0], "the program did not sign"
        statuses = {mode: m["statuses"] for mode, m in s["modes"].items()}
        assert statuses == {"sync": {"SEND_OK": 10}, "async": {"SEND_OK": 10}, "oneway": {"ONEWAY": 10},
                            "batch": {"SEND_OK": 10}}, explain(s, target.server, "modes", "failures")  # fmt: skip
        no_error(p, target.server)
        assert p["expected"] == 40, explain(p, target.server, "expected")
        assert_all_received(p, target.server, f"signed push consumer on {name}")
        for r in (s, p):  # heartbeats, offset commits, rebalances: a refusal of those is only logged
            refused = [ln for ln in client_log_text(r).splitlines() if "AclException" in ln]
            assert not refused, f"{name} {r['scenario']}: refusals in the client log:\n" + "\n".join(refused[:10])
    print(f"\n[{program.version}] signed: sent {statuses}; received "
          + ", ".join(f"{n} {p['distinct']}/{p['expected']}" for n, p in pushed.items()))


# -- 2. refused: signatures -------------------------------------------------------------------------------


@pytest.mark.parametrize(("keys", "message"), [
    ({"access_key": USER[0], "secret_key": WRONG_SECRET}, f"Check signature failed for accessKey={USER[0]}"),
    ({}, "No accessKey is configured"),
], ids=["wrong-secret", "unsigned"])  # fmt: skip
def test_a_wrong_secret_or_an_unsigned_client_is_refused_alike(
    program: ScenarioProgram, servers: dict[str, Target], tmp_path: Path, keys: dict[str, str], message: str
) -> None:
    topic = unique_name("AclRefused", program.line)
    results = on_both(servers, lambda t: program.run(
        "send", namesrv=t.server.namesrv, topic=topic, group=f"{topic}-pg", count=4,
        manifest=tmp_path / f"{t.name}.tsv", **keys))  # fmt: skip
    for name, r in results.items():
        target = servers[name]
        assert "error" in r and "error_broker_code" in r, f"{name}: not refused by the broker\n" + explain(r, target.server)
        assert r["error_broker_code"] == R.SYSTEM_ERROR, explain(r, target.server, "error")
        assert acl_message(target, r["error_broker_remark"]) == message, explain(r, target.server, "error")


# -- 2. refused: topics and groups ----------------------------------------------------------------------


def test_a_send_to_a_denied_topic_is_refused_and_a_batch_only_by_rmqproxy(
    program: ScenarioProgram, servers: dict[str, Target], tmp_path: Path
) -> None:
    """Sync and async sends to a DENY topic are refused alike (oneway ones are not answered). A
    batch (SEND_BATCH_MESSAGE) is refused by rmqproxy and stored by the 4.9.7 reference, whose ACL
    checks no permission for that code (reference difference)."""
    results = on_both(servers, lambda t: program.run(
        "send", namesrv=t.server.namesrv, topic="AclDenied", group="AclDeniedPg", count=4,
        manifest=tmp_path / f"{t.name}.tsv", access_key=USER[0], secret_key=USER[1]))  # fmt: skip
    for name, r in results.items():
        target = servers[name]
        no_error(r, target.server)  # the warm-up topic AclDenied-warmup is allowed (default PUB|SUB)
        statuses = {mode: m["statuses"] for mode, m in r["modes"].items()}
        batch = {"SEND_OK": 1} if target.reference else {"EXCEPTION": 1}
        assert statuses == {"sync": {"EXCEPTION": 1}, "async": {"EXCEPTION": 1}, "oneway": {"ONEWAY": 1},
                            "batch": batch}, explain(r, target.server, "modes", "failures")  # fmt: skip
        refusals = {refusal for failure in r["failures"] for refusal in broker_refusals(target, failure)}
        assert refusals == {(R.SYSTEM_ERROR, "No default permission for topic:AclDenied")}, r["failures"]


def test_a_push_consumer_of_a_denied_group_gets_nothing(
    program: ScenarioProgram, servers: dict[str, Target], sent: dict[str, dict[str, Any]]
) -> None:
    """A signed push consumer in a DENY group: its heartbeats and pulls are refused alike, and not
    one message arrives within 3 s (the same messages reach an allowed group: the test above)."""
    pushed = on_both(servers, lambda t: program.run(
        "push", namesrv=t.server.namesrv, manifest=sent[t.name]["_manifest"], group="AclDeniedGroup",
        timeout_ms=3000, grace_ms=0, access_key=USER[0], secret_key=USER[1]))  # fmt: skip
    for name, r in pushed.items():
        target = servers[name]
        no_error(r, target.server)
        assert (r["expected"], r["received"]) == (40, 0), explain(r, target.server, "expected", "received")
        refusals = set(broker_refusals(target, client_log_text(r)))
        assert refusals == {(R.SYSTEM_ERROR, "No default permission for group:AclDeniedGroup")}, (
            f"{name}: {refusals}\n" + explain(r, target.server))


def _group_denied(code: int, ext: dict[str, str], body: bytes = b"") -> tuple[int, dict[str, str], bytes, str]:
    return code, ext, body, "No default permission for group:AclDeniedGroup"


def _topic_denied(topic: str, code: int, ext: dict[str, str], body: bytes = b"") -> tuple[int, dict[str, str], bytes, str]:
    return code, ext, body, f"No default permission for topic:{topic}"


def _admin_denied(code: int, ext: dict[str, str], body: bytes = b"") -> tuple[int, dict[str, str], bytes, str]:
    return code, ext, body, f"Need admin permission for request code={code}, but accessKey={USER[0]} is not"


#: Requests signed by the user account that its permissions refuse: (code, ext, body, message).
SIGNED_REFUSALS = {
    "send-deny-topic": _topic_denied("AclDenied", C.SEND_MESSAGE_V2, send_ext("AclDenied"), b"x"),
    "send-sub-only-topic": _topic_denied("AclSubOnly", C.SEND_MESSAGE_V2, send_ext("AclSubOnly"), b"x"),
    "pull-deny-topic": _topic_denied("AclDenied", C.PULL_MESSAGE, pull_ext("AclWireCg", "AclDenied")),
    "query-deny-topic": _topic_denied("AclDenied", C.QUERY_MESSAGE, {
        "topic": "AclDenied", "key": "k", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": "9999999999999"}),
    "heartbeat-deny-topic": _topic_denied("AclDenied", C.HEART_BEAT, {}, heartbeat("AclWireCg", "AclDenied")),
    "pull-deny-group": _group_denied(C.PULL_MESSAGE, pull_ext("AclDeniedGroup", "AclWire")),
    "heartbeat-deny-group": _group_denied(C.HEART_BEAT, {}, heartbeat("AclDeniedGroup", "AclWire")),
    "offset-commit-deny-group": _group_denied(C.UPDATE_CONSUMER_OFFSET, header(
        C.UPDATE_CONSUMER_OFFSET, consumer_group="AclDeniedGroup", topic="AclWire", queue_id=0, commit_offset=1)),
    "unregister-deny-group": _group_denied(C.UNREGISTER_CLIENT,
                                           {"clientID": "127.0.0.1@acl#1", "consumerGroup": "AclDeniedGroup"}),
    "consumer-list-deny-group": _group_denied(C.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "AclDeniedGroup"}),
    "send-back-deny-group": _group_denied(C.CONSUMER_SEND_MSG_BACK, {
        "offset": "0", "group": "AclDeniedGroup", "delayLevel": "0", "originMsgId": "x", "originTopic": "AclWire",
        "unitMode": "false", "maxReconsumeTimes": "16"}),
    "send-to-retry-of-deny-group": _group_denied(
        C.SEND_MESSAGE_V2, send_ext("%RETRY%AclDeniedGroup", group="AclDeniedGroup"), b"x"),
    "admin-update-topic": _admin_denied(C.UPDATE_AND_CREATE_TOPIC, header(
        C.UPDATE_AND_CREATE_TOPIC, topic="AclWireNew", default_topic="TBW102", read_queue_nums=4,
        write_queue_nums=4, perm=6, topic_filter_type="SINGLE_TAG", order=False)),
    "admin-update-broker-config": _admin_denied(C.UPDATE_BROKER_CONFIG, {}, b"brokerPermission=6"),
    "admin-delete-topic": _admin_denied(C.DELETE_TOPIC_IN_BROKER, {"topic": "AclWire"}),
    "admin-create-group": _admin_denied(C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, b'{"groupName":"AclWireG"}'),
    "admin-delete-group": _admin_denied(C.DELETE_SUBSCRIPTIONGROUP, {"groupName": "AclWireG"}),
}  # fmt: skip


@pytest.mark.parametrize("case", list(SIGNED_REFUSALS))
def test_a_signed_request_beyond_the_accounts_permissions_is_refused_alike(servers: dict[str, Target], case: str) -> None:
    code, ext, body, message = SIGNED_REFUSALS[case]
    answers = on_both(servers, lambda t: call(t.server.broker_addr, code, signed(ext, USER, body), body))
    assert_refused_alike(answers, servers, message)


def test_signatures_and_whitelists_on_the_wire(servers: dict[str, Target]) -> None:
    """Unsigned, unknown, wrongly and rightly signed sends; the account whitelist (its key without
    a signature passes from 127.0.0.1, even to a topic it may not use, as on the reference: a
    white-listed address skips the permission checks too, but must sign from 127.0.0.2) and the
    global whitelist (127.0.0.3: no key at all)."""
    ext = send_ext("AclWire")

    def send(t: Target, ext: dict[str, str], source: str = "127.0.0.1") -> RemotingCommand:
        return call(t.server.broker_addr, C.SEND_MESSAGE_V2, ext, b"x", source=source)

    assert_refused_alike(on_both(servers, lambda t: send(t, ext)), servers, "No accessKey is configured")
    assert_refused_alike(on_both(servers, lambda t: send(t, signed(ext, ("aclNobodyKey", WRONG_SECRET), b"x"))),
                         servers, "No acl config for aclNobodyKey")  # fmt: skip
    assert_refused_alike(on_both(servers, lambda t: send(t, signed(ext, (USER[0], WRONG_SECRET), b"x"))),
                         servers, f"Check signature failed for accessKey={USER[0]}")  # fmt: skip
    assert_refused_alike(on_both(servers, lambda t: send(t, {**ext, "AccessKey": USER[0]})),
                         servers, f"Check signature failed for accessKey={USER[0]}")  # fmt: skip
    local_unsigned = {**ext, "AccessKey": LOCAL[0]}
    assert_refused_alike(on_both(servers, lambda t: send(t, local_unsigned, OUTSIDE)),
                         servers, f"Check signature failed for accessKey={LOCAL[0]}")  # fmt: skip
    passes = {
        "signed": lambda t: send(t, signed(ext, USER, b"x")),
        "white-listed account, unsigned": lambda t: send(t, local_unsigned),
        "white-listed account, unsigned, user-denied topic": lambda t: send(
            t, {**send_ext("AclDenied"), "AccessKey": LOCAL[0]}),
        "white-listed account, signed, from outside": lambda t: send(t, signed(ext, LOCAL, b"x"), OUTSIDE),
        "global whitelist, no key": lambda t: send(t, ext, GLOBAL_WHITE),
        "route request, unsigned, to the name server": lambda t: call(
            t.server.namesrv, C.GET_ROUTEINFO_BY_TOPIC, header(C.GET_ROUTEINFO_BY_TOPIC, topic="TBW102")),
    }
    for what, step in passes.items():
        answers = on_both(servers, step)
        assert all(a.code == R.SUCCESS for a in answers.values()), (what, {n: (a.code, a.remark) for n, a in answers.items()})


@ONLY_49  # the server's address check, not the client's signing: one line is enough
def test_a_java_client_from_its_accounts_white_listed_address_needs_no_right_secret(
    program: ScenarioProgram, servers: dict[str, Target], tmp_path: Path
) -> None:
    """The white-listed account's key with a wrong secret, from 127.0.0.1: every send passes."""
    topic = unique_name("AclLocal", program.line)
    results = on_both(servers, lambda t: program.run(
        "send", namesrv=t.server.namesrv, topic=topic, group=f"{topic}-pg", count=8,
        manifest=tmp_path / f"{t.name}.tsv", access_key=LOCAL[0], secret_key=WRONG_SECRET))  # fmt: skip
    for name, r in results.items():
        no_error(r, servers[name].server)
        statuses = {mode: m["statuses"] for mode, m in r["modes"].items()}
        assert statuses == {"sync": {"SEND_OK": 2}, "async": {"SEND_OK": 2}, "oneway": {"ONEWAY": 2},
                            "batch": {"SEND_OK": 2}}, explain(r, servers[name].server, "modes", "failures")  # fmt: skip


# -- 2 and 3. mqadmin with tools.yml ----------------------------------------------------------------------


def mqadmin_command(result: dict[str, Any], name: str, arg: str | None = None) -> dict[str, Any]:
    """The one command ``name`` (with ``arg`` among its arguments) of an mqadmin scenario's result."""
    found = [c for c in result["commands"] if c["name"] == name and (arg is None or arg in c["args"])]
    assert len(found) == 1, (name, arg, [c["args"] for c in result["commands"]])
    return found[0]


@ONLY_49
def test_mqadmin_with_an_admin_tools_yml_administers_and_with_a_users_is_refused(
    program: ScenarioProgram, servers: dict[str, Target], sent: dict[str, dict[str, Any]]
) -> None:
    """4.9.8 mqadmin signs with ``conf/tools.yml`` (the scenario writes it from the keys): the
    admin account's creates a topic with 4 queues and routes it (and the user's lists it); the
    user account's updateTopic is refused alike and creates nothing. (5.x mqadmin signs with the hook it is
    given, the same AclClientRPCHook the clients above use.)"""
    runs = {}
    for who, keys in (("admin", ADMIN), ("user", USER)):
        new_topic = unique_name(f"AclMqadmin{who.title()}", program.line)
        runs[who] = (new_topic, on_both(servers, lambda t, new_topic=new_topic, keys=keys: program.run(
            "mqadmin", namesrv=t.server.namesrv, topic=sent[t.name]["topic"], group="AclMqadminCg",
            msg_id=sent[t.name]["samples"][0]["offset_msg_id"], key=sent[t.name]["samples"][0]["key"],
            new_topic=new_topic, access_key=keys[0], secret_key=keys[1])))  # fmt: skip
    admin_topic, user_topic = runs["admin"][0], runs["user"][0]
    for name, target in servers.items():
        for who in ("admin", "user"):
            no_error(runs[who][1][name], target.server)
        admin = runs["admin"][1][name]
        update = mqadmin_command(admin, "updateTopic")
        assert "success" in update["stdout"] and admin_topic in update["stdout"], (name, update)
        route = mqadmin_command(admin, "topicRoute", admin_topic)
        assert target.server.broker_addr in route["stdout"] and '"writeQueueNums":4' in route["stdout"], (name, route)
        user = runs["user"][1][name]
        listed = mqadmin_command(user, "topicList")["stdout"].split()  # the user's run came after the admin's
        assert admin_topic in listed, (name, listed)
        refused = mqadmin_command(user, "updateTopic")
        assert "success" not in refused["stdout"], (name, refused)
        expected = (R.SYSTEM_ERROR, f"Need admin permission for request code=17, but accessKey={USER[0]} is not")
        assert expected in broker_refusals(target, refused["stderr"]), (name, refused["stderr"][-3000:])
        for topic, code in ((admin_topic, R.SUCCESS), (user_topic, R.TOPIC_NOT_EXIST)):
            answer = call(target.server.namesrv, C.GET_ROUTEINFO_BY_TOPIC, header(C.GET_ROUTEINFO_BY_TOPIC, topic=topic))
            assert answer.code == code, (name, topic, answer.code, answer.remark)


# -- 4. a changed plain_acl.yml ---------------------------------------------------------------------------


@ONLY_49
def test_a_granted_topic_takes_effect_without_a_restart(
    program: ScenarioProgram, servers: dict[str, Target], tmp_path: Path
) -> None:
    """The user's sync send to AclLater (DENY) is refused; plain_acl.yml is rewritten with
    AclLater=PUB|SUB; within 15 s the same signed send passes on each, and so does the Java client's."""

    def java_send(t: Target, run: str) -> dict[str, Any]:
        return program.run("send", namesrv=t.server.namesrv, topic="AclLater", group="AclLaterPg", count=4,
                           manifest=tmp_path / f"{t.name}-{run}.tsv", access_key=USER[0], secret_key=USER[1])  # fmt: skip

    before = on_both(servers, lambda t: java_send(t, "before"))
    for name, r in before.items():
        target = servers[name]
        no_error(r, target.server)
        assert r["modes"]["sync"]["statuses"] == {"EXCEPTION": 1}, explain(r, target.server, "modes", "failures")
        sync_failure = next(f for f in r["failures"] if f.startswith("sync "))
        assert broker_refusals(target, sync_failure)[-1] == (R.SYSTEM_ERROR, "No default permission for topic:AclLater")

    def wait_granted(t: Target) -> float:
        ext = signed(send_ext("AclLater"), USER, b"x")
        _write_acl(t.acl_file, GRANTED_YAML)
        t0 = time.monotonic()
        while True:
            answer = call(t.server.broker_addr, C.SEND_MESSAGE_V2, ext, b"x")
            waited = time.monotonic() - t0
            if answer.code == R.SUCCESS:
                return waited
            assert waited < RELOAD_WITHIN_S, f"{t.name}: still {answer.code} {answer.remark!r} after {waited:.1f}s"
            time.sleep(0.2)

    waited = on_both(servers, wait_granted)
    after = on_both(servers, lambda t: java_send(t, "after"))
    for name, r in after.items():
        no_error(r, servers[name].server)
        assert r["failure_count"] == 0 and r["modes"]["sync"]["statuses"] == {"SEND_OK": 1}, (
            explain(r, servers[name].server, "modes", "failures"))
    print("\nreload took effect after " + ", ".join(f"{n} {s:.1f}s" for n, s in waited.items()))


# -- where rmqproxy differs from the reference ------------------------------------------------------------


def test_where_rmqproxy_is_stricter_or_creates_more_than_the_reference(servers: dict[str, Target]) -> None:
    """The reference differences of the module docstring (but the batch, checked with a real client
    above), one assertion per server."""
    rmqproxy, apache = servers["rmqproxy"], servers["apache"]

    acl_info = {n: call(t.server.broker_addr, acl.GET_BROKER_CLUSTER_ACL_INFO, signed({}, USER)) for n, t in servers.items()}
    assert acl_info["apache"].code == R.SUCCESS, acl_info["apache"].remark
    assert acl_info["rmqproxy"].code == R.SYSTEM_ERROR and acl_message(rmqproxy, acl_info["rmqproxy"].remark) == (
        f"Need admin permission for request code=52, but accessKey={USER[0]} is not")

    delete = {n: call(t.server.namesrv, C.DELETE_TOPIC_IN_NAMESRV, {"topic": "AclNoSuchTopic"}) for n, t in servers.items()}
    assert delete["apache"].code == R.SUCCESS, delete["apache"].remark  # the reference name server has no ACL
    assert delete["rmqproxy"].code == R.SYSTEM_ERROR, delete["rmqproxy"].remark
    assert acl_message(rmqproxy, delete["rmqproxy"].remark) == "No accessKey is configured"

    # a group nobody signed for: its retry topic does not exist before the unsigned route request
    retry = "%RETRY%" + unique_name("AclUnsignedCg", "route")
    route = {n: call(t.server.namesrv, C.GET_ROUTEINFO_BY_TOPIC, header(C.GET_ROUTEINFO_BY_TOPIC, topic=retry))
             for n, t in servers.items()}  # fmt: skip
    assert route["apache"].code == R.TOPIC_NOT_EXIST, route["apache"].remark
    assert route["rmqproxy"].code == R.SYSTEM_ERROR, route["rmqproxy"].remark
    assert acl_message(rmqproxy, route["rmqproxy"].remark) == "No accessKey is configured"
    topics = call(rmqproxy.server.namesrv, C.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, {})
    assert retry not in TopicList.from_json(topics.body).topic_list, "an unsigned route request created a topic"
    assert call(apache.server.namesrv, C.GET_ROUTEINFO_BY_TOPIC, header(C.GET_ROUTEINFO_BY_TOPIC, topic=retry)).code == (
        R.TOPIC_NOT_EXIST), "the reference created it after all"
