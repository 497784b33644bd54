"""Plain ACL (``aclEnable=true``) on the whole server, on task.Clock: signed requests, admin codes,
topic and group permissions, whitelists, reloads, and the reference's refusals (rmqproxy/broker/acl.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from twisted.logger import globalLogPublisher

from codec.bodies import ConsumerData, HeartbeatData, ProducerData, build_subscription
from codec.codes import FLAG_ONEWAY
from codec.codes import RequestCode as C
from codec.codes import ResponseCode as R
from codec.command import RemotingCommand
from codec.headers import REQUEST_HEADERS
from rmqproxy.broker.acl import AclError, address_matcher, load_rules, signature
from rmqproxy.cli import main

from ..server.harness import Client, make_server, send_header

SECRET = "secret-of-alice"
ACL = """
globalWhiteRemoteAddresses:
  - 10.9.9.*
accounts:
  - accessKey: alice-key
    secretKey: secret-of-alice
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - T=PUB|SUB
      - ReadOnly=SUB
    groupPerms:
      - blocked=DENY
  - accessKey: admin-key
    secretKey: 12345678
    admin: true
  - accessKey: office-key
    secretKey: secret-of-office
    whiteRemoteAddress: 10.0.0.5
    defaultTopicPerm: PUB
"""
EXCEPTION = "org.apache.rocketmq.acl.common.AclException: "


def acl_home(tmp_path: Path, text: str = ACL) -> Path:
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True, exist_ok=True)
    (home / "conf" / "plain_acl.yml").write_text(text)
    return home


class Signed(Client):
    """A client whose requests carry ``AccessKey`` and the ``Signature`` of ``secret`` (as the Java
    client's AclClientRPCHook signs them), or no signature when ``secret`` is None."""

    def __init__(self, server: Any, access_key: str | None, secret: str | None, client_id: str = "10.0.0.5@1#1",
                 **kw: Any) -> None:  # fmt: skip
        super().__init__(server, client_id, **kw)
        self.access_key, self.secret = access_key, secret

    def send(self, code: int, header: Any = None, body: bytes = b"", *, flag: int = 0, ext=None, **fields) -> int:
        """The harness client's request, its fields signed."""
        if header is None and fields:
            header = REQUEST_HEADERS[code].cls(**fields)
        ext = dict(REQUEST_HEADERS[code].encode(header) if header is not None else ext or {})
        if self.access_key is not None:
            ext["AccessKey"] = self.access_key
        if self.secret is not None:
            ext["Signature"] = signature(self.secret, ext, body, self.version)
        return super().send(code, body=body, flag=flag, ext=ext)


def acl_server(tmp_path: Path, text: str = ACL):
    return make_server(tmp_path, acl_enable=True, rocketmq_home=str(acl_home(tmp_path, text)))


def denied(answer: RemotingCommand, message: str) -> bool:
    return (answer.code, answer.remark) == (R.SYSTEM_ERROR, EXCEPTION + message)


def test_signatures_are_the_reference_clients() -> None:
    """HmacSHA1 over the values in key order (Signature left out), then the body, in Base64; the
    first value is what Java's Mac gives for this key and text."""
    assert signature("12345678", {"x": "RocketMQ"}, b"", 407) == "IUc8rrO/0gDch8CjObLQsW2rsiA="
    ext = {"consumerGroup": "groupB", "AccessKey": "RocketMQ", "Signature": "ignored"}
    assert signature("12345678", ext, b"", 407) == signature("12345678", {"x": "RocketMQgroupB"}, b"", 407)
    with_body = signature("12345678", {"AccessKey": "RocketMQ", "SecurityToken": "tok"}, b'{"clientID":"c1"}', 407)
    assert with_body == signature("12345678", {"x": 'RocketMQtok{"clientID":"c1"}'}, b"", 407)
    # keys in Java's String order, UTF-16 units: an astral character sorts below U+FFFF there
    assert signature("s", {"\uffff": "a", "\U0001F600": "b"}, b"", 407) == signature("s", {"x": "ba"}, b"", 407)
    # clients up to 4.9.3 (version 399) did not sign _UNIQUE_KEY_QUERY, later ones do
    flagged = {"AccessKey": "k", "_UNIQUE_KEY_QUERY": "true"}
    assert signature("s", flagged, b"", 399) == signature("s", {"AccessKey": "k"}, b"", 399)
    assert signature("s", flagged, b"", 407) != signature("s", {"AccessKey": "k"}, b"", 407)


def test_a_signed_client_sends_and_pulls_what_its_account_allows(tmp_path) -> None:
    server, _ = acl_server(tmp_path)
    try:
        alice = Signed(server, "alice-key", SECRET)
        assert alice.send_message("T").code == R.SUCCESS
        assert alice.answer(alice.pull_message("T", 0, group="readers"), required=True).code == R.SUCCESS
        read_only = alice.answer(alice.pull_message("ReadOnly", 0, group="readers"), required=True)
        assert read_only.code == R.TOPIC_NOT_EXIST  # past the ACL: the broker's own answer
        assert Signed(server, None, None).call(C.GET_ROUTEINFO_BY_TOPIC, topic="T").code == R.SUCCESS  # open
    finally:
        server.stop()


def test_each_refusal_is_the_references_code_and_text(tmp_path) -> None:
    server, _ = acl_server(tmp_path)
    try:
        assert denied(Signed(server, None, None).send_message("T"), "No accessKey is configured")
        assert denied(Signed(server, "mallory-key", SECRET).send_message("T"), "No acl config for mallory-key")
        assert denied(Signed(server, "alice-key", "wrong-secret").send_message("T"), "Check signature failed for accessKey=alice-key")
        assert denied(Signed(server, "alice-key", None).send_message("T"), "Check signature failed for accessKey=alice-key")
        alice = Signed(server, "alice-key", SECRET)
        assert denied(alice.send_message("Other"), "No default permission for topic:Other")  # default DENY
        assert denied(alice.send_message("ReadOnly"), "No default permission for topic:ReadOnly")  # SUB only
        blocked = alice.answer(alice.pull_message("T", 0, group="blocked"), required=True)
        assert denied(blocked, "No default permission for group:blocked")
        create = alice.call(C.UPDATE_AND_CREATE_TOPIC, topic="New", default_topic="TBW102", read_queue_nums=4,
                            write_queue_nums=4, perm=6, topic_filter_type="SINGLE_TAG", topic_sys_flag=0, order=False)  # fmt: skip
        assert denied(create, "Need admin permission for request code=17, but accessKey=alice-key is not")
        assert server.topics.get("New") is None
        counts = server.rejections.counts
        assert (counts["acl_no_access_key"], counts["acl_unknown_account"], counts["acl_signature"],
                counts["acl_permission"], counts["acl_admin"]) == (1, 1, 2, 3, 1)  # fmt: skip
    finally:
        server.stop()


def test_an_admin_account_administers_and_a_denial_never_shows_a_secret(tmp_path) -> None:
    events: list[dict] = []
    globalLogPublisher.addObserver(events.append)
    server, _ = acl_server(tmp_path)
    try:
        admin = Signed(server, "admin-key", "12345678")  # YAML reads this secret as a number
        create = admin.call(C.UPDATE_AND_CREATE_TOPIC, topic="New", default_topic="TBW102", read_queue_nums=4,
                            write_queue_nums=4, perm=6, topic_filter_type="SINGLE_TAG", topic_sys_flag=0, order=False)  # fmt: skip
        assert create.code == R.SUCCESS and server.topics.get("New") is not None
        assert admin.send_message("Anything").code == R.SUCCESS  # an admin without perms of its own may do all
        wrong = Signed(server, "alice-key", "not-" + SECRET).send_message("T")
        assert "not-" not in (wrong.remark or "")
    finally:
        server.stop()
        globalLogPublisher.removeObserver(events.append)
    logged = " ".join(str(e.get("why", "")) + str(e.get("log_format", "")) for e in events)
    assert "accessKey=alice-key" in logged and SECRET not in logged and "12345678" not in logged


def test_whitelists_skip_what_the_reference_skips(tmp_path) -> None:
    """The global whitelist lets anything in; an account's whitelist lets its key in unsigned;
    outside it, the same key must sign."""
    server, _ = acl_server(tmp_path)
    try:
        anyone = Signed(server, None, None)
        anyone.conn.ip = "10.9.9.200"
        assert anyone.send_message("Whatever").code == R.SUCCESS
        office = Signed(server, "office-key", None)  # the harness's clients come from 10.0.0.5
        assert office.send_message("Whatever").code == R.SUCCESS
        office.conn.ip = "10.0.0.6"
        assert denied(office.send_message("Whatever"), "Check signature failed for accessKey=office-key")
        assert Signed(server, "office-key", "secret-of-office").send_message("Whatever").code == R.SUCCESS
    finally:
        server.stop()


def test_a_route_request_that_would_create_a_retry_topic_needs_the_group(tmp_path) -> None:
    """Routes are open, as on a reference name server, but a retry topic's route creates the
    topic here: a peer without an account, or without the group's SUB, creates nothing."""
    server, _ = acl_server(tmp_path)
    try:
        route = Signed(server, None, None).call(C.GET_ROUTEINFO_BY_TOPIC, topic="%RETRY%readers")
        assert denied(route, "No accessKey is configured") and server.topics.get("%RETRY%readers") is None
        alice = Signed(server, "alice-key", SECRET)
        assert denied(alice.call(C.GET_ROUTEINFO_BY_TOPIC, topic="%RETRY%blocked"), "No default permission for group:blocked")
        assert alice.call(C.GET_ROUTEINFO_BY_TOPIC, topic="%RETRY%readers").code == R.SUCCESS
        assert server.topics.get("%RETRY%readers") is not None
    finally:
        server.stop()


def test_a_heartbeat_send_back_and_offset_need_their_group_and_topics(tmp_path) -> None:
    server, _ = acl_server(tmp_path)
    try:
        alice = Signed(server, "alice-key", SECRET)

        def heartbeat(group: str, topic: str) -> RemotingCommand:
            data = HeartbeatData(alice.client_id, [ProducerData("CLIENT_INNER_PRODUCER")],
                                 [ConsumerData(group, "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_FIRST_OFFSET",
                                               [build_subscription(topic, "*", 1)], False)])  # fmt: skip
            return alice.call(C.HEART_BEAT, body=data.to_json())

        assert heartbeat("readers", "T").code == R.SUCCESS
        assert denied(heartbeat("readers", "Other"), "No default permission for topic:Other")
        assert denied(heartbeat("blocked", "T"), "No default permission for group:blocked")
        assert denied(heartbeat("readers", "%RETRY%blocked"), "No default permission for group:blocked")
        offset = alice.call(C.UPDATE_CONSUMER_OFFSET, consumer_group="blocked", topic="T", queue_id=0, commit_offset=1)
        assert denied(offset, "No default permission for group:blocked")
        back = alice.call(C.CONSUMER_SEND_MSG_BACK, offset=0, group="blocked", delay_level=0, origin_msg_id="x",
                          origin_topic="T", unit_mode=False, max_reconsume_times=16)  # fmt: skip
        assert denied(back, "No default permission for group:blocked")
    finally:
        server.stop()


def test_a_denied_oneway_request_gets_no_answer_and_is_counted(tmp_path) -> None:
    server, _ = acl_server(tmp_path)
    try:
        client = Signed(server, "alice-key", "wrong-secret")
        client.send(C.SEND_MESSAGE_V2, send_header("T", 0), b"x", flag=FLAG_ONEWAY)
        assert client.read() == []
        assert server.rejections.counts == {"acl_signature": 1}
    finally:
        server.stop()


def test_a_changed_file_takes_effect_without_a_restart_and_a_bad_one_changes_nothing(tmp_path) -> None:
    server, reactor = acl_server(tmp_path)
    acl_file = tmp_path / "home" / "conf" / "plain_acl.yml"
    try:
        alice = Signed(server, "alice-key", SECRET)
        assert denied(alice.send_message("Other"), "No default permission for topic:Other")
        acl_file.write_text(ACL.replace("defaultTopicPerm: DENY", "defaultTopicPerm: PUB"))
        os.utime(acl_file, ns=(1, 2))  # another modification time, however coarse the file system's clock
        reactor.advance(5)
        assert alice.send_message("Other").code == R.SUCCESS
        acl_file.write_text("accounts:\n  - accessKey: short\n    secretKey: x\n")  # refused by the rules
        os.utime(acl_file, ns=(3, 4))
        reactor.advance(5)
        assert alice.send_message("Other").code == R.SUCCESS  # the rules in force stay
        (tmp_path / "home" / "conf" / "acl").mkdir()
        (tmp_path / "home" / "conf" / "acl" / "team.yml").write_text(
            "accounts:\n  - accessKey: team-key\n    secretKey: secret-of-team\n    defaultTopicPerm: PUB\n")
        acl_file.write_text(ACL)
        os.utime(acl_file, ns=(5, 6))
        reactor.advance(5)
        assert Signed(server, "team-key", "secret-of-team").send_message("Other").code == R.SUCCESS
        assert denied(alice.send_message("Other"), "No default permission for topic:Other")
    finally:
        server.stop()


def test_acl_enable_without_usable_files_stops_startup(tmp_path) -> None:
    home = tmp_path / "empty"
    home.mkdir()
    result = CliRunner().invoke(main, ["serve", "--acl-enable", "true", "--rocketmq-home", str(home),
                                       "--store-path-root-dir", str(tmp_path / "s"), "--metrics-prom-exporter-port", "0"])  # fmt: skip
    assert result.exit_code != 0 and "plain_acl.yml" in result.output
    bad = acl_home(tmp_path, "accounts:\n  - accessKey: alice-key\n    secretKey: secret-of-alice\n    topicPerms: [T]\n")
    with pytest.raises(AclError, match="Parse resource permission failed for topic:T"):
        acl_server(tmp_path, bad.joinpath("conf", "plain_acl.yml").read_text())


@pytest.mark.parametrize(("pattern", "inside", "outside"), [
    ("*", ["1.2.3.4"], []),
    ("192.168.0.{1,2}", ["192.168.0.1", "192.168.0.2"], ["192.168.0.3"]),
    ("192.168.1.1-100", ["192.168.1.1", "192.168.1.100"], ["192.168.1.101", "192.168.2.5"]),
    ("10.10.*.*", ["10.10.0.1", "10.10.255.9"], ["10.11.0.1"]),
    ("1.1.1.1,1.1.1.2", ["1.1.1.2"], ["1.1.1.3"]),
    ("127.0.0.1", ["127.0.0.1"], ["127.0.0.2", "not an ip"]),
    ("", [], ["127.0.0.1"]),
])  # fmt: skip
def test_address_patterns_match_as_the_references(pattern: str, inside: list[str], outside: list[str]) -> None:
    matches = address_matcher(pattern)
    assert all(matches(ip) for ip in inside) and not any(matches(ip) for ip in outside)


@pytest.mark.parametrize("pattern", ["10.0.0.0/8", "1.2.3.4-300", "300.1.1.*", "a.b.c.d"])
def test_address_patterns_the_reference_refuses_are_refused(pattern: str) -> None:
    with pytest.raises(AclError):
        address_matcher(pattern)


def test_the_first_file_naming_an_access_key_wins(tmp_path) -> None:
    first, second = tmp_path / "a.yml", tmp_path / "b.yml"
    first.write_text("accounts:\n  - accessKey: shared-key\n    secretKey: first-secret\n")
    second.write_text("accounts:\n  - accessKey: shared-key\n    secretKey: second-secret\n")
    assert load_rules([first, second]).accounts["shared-key"].secret_key == "first-secret"


def test_the_write_switch_needs_an_admin_and_the_clean_commands_a_signature(tmp_path) -> None:
    """205/327 change what every producer may do: admin only, as DELETE_TOPIC_IN_NAMESRV. The clean
    commands remove nothing readable; the reference's plain ACL asks only a valid signature."""
    server, _ = acl_server(tmp_path)
    try:
        alice = Signed(server, "alice-key", SECRET)
        wipe = alice.call(C.WIPE_WRITE_PERM_OF_BROKER, broker_name="rmqproxy-a")
        assert denied(wipe, "Need admin permission for request code=205, but accessKey=alice-key is not")
        assert server.permission.writable
        admin = Signed(server, "admin-key", "12345678")
        assert admin.call(C.WIPE_WRITE_PERM_OF_BROKER, broker_name="rmqproxy-a").code == R.SUCCESS
        assert not server.permission.writable
        assert denied(Signed(server, None, None).call(C.CLEAN_UNUSED_TOPIC), "No accessKey is configured")
        for code in (C.CLEAN_EXPIRED_CONSUMEQUEUE, C.CLEAN_UNUSED_TOPIC, C.DELETE_EXPIRED_COMMITLOG):
            assert alice.call(code).code == R.SUCCESS
    finally:
        server.stop()


def test_config_changes_need_an_admin_and_name_server_config_reads_are_open(tmp_path) -> None:
    """UPDATE_BROKER_CONFIG (25) is an admin code as in the reference; so here are the name
    server's changes (KV puts and deletes, UPDATE_NAMESRV_CONFIG), which one port serves."""
    server, _ = acl_server(tmp_path)
    try:
        alice = Signed(server, "alice-key", SECRET)
        for code, fields, body in ((C.UPDATE_BROKER_CONFIG, {}, b"maxHeldPulls=5"),
                                   (C.UPDATE_NAMESRV_CONFIG, {}, b"orderMessageEnable=true"),
                                   (C.PUT_KV_CONFIG, {"namespace": "ns", "key": "k", "value": "v"}, b""),
                                   (C.DELETE_KV_CONFIG, {"namespace": "ns", "key": "k"}, b"")):  # fmt: skip
            answer = alice.call(code, body=body, **fields)
            assert denied(answer, f"Need admin permission for request code={code}, but accessKey=alice-key is not")
        assert server.holds.max_held == 100_000 and not server.config.order_message_enable and server.kv.count == 0
        admin = Signed(server, "admin-key", "12345678")
        assert admin.call(C.UPDATE_BROKER_CONFIG, body=b"maxHeldPulls=5").code == R.SUCCESS
        assert admin.call(C.PUT_KV_CONFIG, namespace="ns", key="k", value="v").code == R.SUCCESS
        anyone = Signed(server, None, None)
        assert anyone.call(C.GET_NAMESRV_CONFIG).code == R.SUCCESS
        assert anyone.call(C.GET_KVLIST_BY_NAMESPACE, namespace="ns").code == R.SUCCESS
        assert server.holds.max_held == 5
    finally:
        server.stop()
