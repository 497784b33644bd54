"""gRPC clients under ``aclEnable=true``: the ``authorization`` header a 5.x client sends
(``MQv2-HMAC-SHA1 Credential=<key>, SignedHeaders=x-mq-date-time, Signature=<HMAC-SHA1 hex of the
date header>``) is checked against the plain ACL accounts and permissions remoting uses; a bad
or missing signature, or a missing permission, is UNAUTHORIZED (40100, as the reference answers
both) and counted."""

from __future__ import annotations

import hmac
import time
from pathlib import Path

import pytest

from rmqproxy.grpc_wire import pb
from tests.grpc.harness import make_grpc_server
from tests.security.test_acl import acl_home


def _signed(access_key: str, secret: str) -> list[tuple[str, str]]:
    stamp = time.strftime("%Y%m%dT%H%M%SZ")
    signature = hmac.digest(secret.encode(), stamp.encode(), "sha1").hex().upper()
    return [("x-mq-date-time", stamp),
            ("authorization", f"MQv2-HMAC-SHA1 Credential={access_key}, SignedHeaders=x-mq-date-time, "
                              f"Signature={signature}")]  # fmt: skip


@pytest.fixture
def served(tmp_path: Path):
    home = acl_home(tmp_path)
    server, reactor, client = make_grpc_server(tmp_path, acl_enable=True, rocketmq_home=str(home))
    server.topics.ensure("T", 1)
    server.topics.ensure("Other", 1)
    yield server, reactor, client
    client.close()
    server.stop()


def _send(client, topic: str, extra: list[tuple[str, str]]) -> pb.SendMessageResponse:
    m = pb.Message(topic=pb.Resource(name=topic), body=b"x")
    m.system_properties.message_id, m.system_properties.message_type = "01ACL", pb.NORMAL
    fn = client.stub.SendMessage
    request = pb.SendMessageRequest(messages=[m])
    return client.pump(client.start(lambda: fn(request, metadata=client.metadata + extra, timeout=10)))


def test_a_signed_call_with_the_permission_is_served(served) -> None:
    server, reactor, client = served
    assert _send(client, "T", _signed("alice-key", "secret-of-alice")).status.code == pb.OK


@pytest.mark.parametrize(("topic", "extra", "words", "reason"), [
    ("T", "none", "No accessKey is configured", "acl_no_access_key"),
    ("T", "wrong", "Check signature failed for accessKey=alice-key", "acl_signature"),
    ("T", "nobody", "No acl config for nobody-key", "acl_unknown_account"),
    ("Other", "alice", "No default permission for topic:Other", "acl_permission"),
])  # fmt: skip
def test_bad_or_missing_signatures_and_permissions_are_unauthorized(served, topic, extra, words, reason) -> None:
    server, reactor, client = served
    headers = {"wrong": _signed("alice-key", "not-her-secret"), "nobody": _signed("nobody-key", "x"),
               "alice": _signed("alice-key", "secret-of-alice")}.get(extra, [])  # fmt: skip
    answer = _send(client, topic, headers)
    assert answer.status.code == pb.UNAUTHORIZED and words in answer.status.message
    reactor.run_thread_calls(timeout=0.1)
    assert server.rejections.counts.get(reason, 0) >= 1
    assert server.store.max_offset(topic, 0) == 0
