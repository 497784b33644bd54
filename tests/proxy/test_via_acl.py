"""ACL-signed real Java clients through ``rmqproxy proxy`` in front of an ACL-enabled Apache 4.9.7
cluster (the session's shared "4.9.7-acl": broker-a, broker-b; ``plain_acl.yml`` holds one admin
account and no white-listed address, so every broker request must carry a valid signature).

The proxy relays every request unchanged but for its opaque, so the clients' AclClientRPCHook
signatures (HMAC-SHA1 over the sorted ext field values and the body) must verify at the brokers:

- with the right keys a producer's sync, async, oneway and batch sends and a push consumer's pulls,
  offset commits and heartbeats all pass, and every message arrives;
- with a wrong secret (and unsigned) the brokers refuse the send, and what the client sees through
  the proxy (the MQBrokerException's response code and remark) is what it sees over a direct
  connection to the same cluster;
- a refused long-polling PULL_MESSAGE (the request the proxy reads and holds itself) is answered
  through the proxy at once with the broker's code and remark, as directly (on the wire).

Both client lines (4.9.8, 5.5.0) run the client tests through the scenario program's
``--access-key``/``--secret-key`` options.
"""

from __future__ import annotations

import base64
import concurrent.futures
import hashlib
import hmac
import re
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from codec.bodies import TopicRouteData
from codec.codes import PullSysFlag, RequestCode
from codec.command import RemotingCommand
from codec.headers import REQUEST_HEADERS
from tests.interop.apache_cluster import SHARED_ACL, ApacheCluster
from tests.interop.scenario_checks import assert_all_received, explain, no_error, send_to_new_topic
from tests.interop.scenario_runner import ScenarioProgram, unique_name
from tests.interop.wire import WireClient, roundtrip

from .proxied import ONLY_49, ProxiedCluster

pytestmark = pytest.mark.apache_cluster("4.9.7-acl")

ACCESS_KEY = SHARED_ACL["accessKey"]
SECRET_KEY = SHARED_ACL["secretKey"]
WRONG_SECRET = "notTheSecret42"
SEND_COUNT = 200  # a quarter each: sync, async, oneway, batch (batches of 10)

#: What a broker's ACL check or a client's signing problem leaves in a client log.
_ACL_TROUBLE = re.compile(r"AclException|Check signature failed|No accessKey|No acl config")
_ADDR = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}:\d+\b")
_EXCEPTION_CLASS = re.compile(r"\b((?:[a-z_][\w]*\.)+[A-Z]\w*(?:Exception|Error))\b")


@pytest.fixture(scope="module")
def proxied(apache_clusters: Callable[[str], ApacheCluster]) -> Iterator[ProxiedCluster]:
    with ProxiedCluster(apache_clusters("4.9.7-acl")) as server:
        yield server


def _acl_trouble_in_client_log(result: dict[str, Any]) -> list[str]:
    lines = []
    for path in sorted(Path(result["_log_dir"]).rglob("*")):
        if path.is_file():
            lines += [ln for ln in path.read_text(errors="replace").splitlines() if _ACL_TROUBLE.search(ln)]
    return lines


def _addr_port(addr: str | None) -> int:
    assert addr and _ADDR.fullmatch(addr), f"not an ip:port address: {addr!r}"
    return int(addr.rsplit(":", 1)[1])


def _essential(remark: str) -> str:
    """The remark without addresses (the only part that may differ between proxy and direct)."""
    return _ADDR.sub("ADDR", remark).strip()


# -- (a) the right keys ---------------------------------------------------------------------------


def test_signed_send_and_push_consume_everything_through_the_proxy(
    program: ScenarioProgram, proxied: ProxiedCluster, tmp_path_factory: pytest.TempPathFactory
) -> None:
    keys = {"access_key": ACCESS_KEY, "secret_key": SECRET_KEY}
    sent = send_to_new_topic(program, proxied, tmp_path_factory, "AclSend", count=SEND_COUNT, batch_size=10, **keys)
    no_error(sent, proxied)
    assert sent["access_key"] == ACCESS_KEY, "the program did not sign (no access_key in its RESULT)"
    assert sent["warmup"] == "SEND_OK", explain(sent, proxied, "warmup")
    quarter = SEND_COUNT // 4
    expected_statuses = {"sync": {"SEND_OK": quarter}, "async": {"SEND_OK": quarter},
                         "oneway": {"ONEWAY": quarter}, "batch": {"SEND_OK": quarter}}  # fmt: skip
    statuses = {mode: m["statuses"] for mode, m in sent["modes"].items()}
    assert statuses == expected_statuses, explain(sent, proxied, "modes", "failures")
    assert sent["failure_count"] == 0, explain(sent, proxied, "failures")
    brokers = {s["broker_name"] for s in sent["samples"]}
    assert brokers <= {"broker-a", "broker-b"} and brokers, sent["samples"]

    pushed = program.run("push", namesrv=proxied.namesrv, manifest=sent["_manifest"],
                         group=unique_name("AclPush", program.line), timeout_ms=60000, **keys)  # fmt: skip
    no_error(pushed, proxied)
    assert pushed["access_key"] == ACCESS_KEY
    # every key, the oneway ones included (a refused oneway send would only show up here)
    assert pushed["expected"] == SEND_COUNT, explain(pushed, proxied, "expected")
    assert_all_received(pushed, proxied, "signed push through the proxy")

    # the pulls really went through the proxy (its pull log), not around it
    relayed = sum(e["msgs"] for e in proxied.proxy.pull_events()
                  if e["topic"] == sent["topic"] and e["code"] == "SUCCESS")  # fmt: skip
    assert relayed >= SEND_COUNT, f"the proxy relayed only {relayed} of {SEND_COUNT} messages"

    # no request of either client was refused on the way (heartbeats, offset commits, rebalances
    # are not counted above, and a broker's refusal of them is only logged by the client)
    for result in (sent, pushed):
        trouble = _acl_trouble_in_client_log(result)
        assert not trouble, f"{result['scenario']}: ACL refusals in the client log:\n" + "\n".join(trouble[:20])
    print(f"\n[{program.version}] signed via proxy: send {statuses}, push received={pushed['received']} "
          f"distinct={pushed['distinct']} duplicates={pushed['duplicates']}, proxy relayed {relayed} pulled messages")


# -- (b) a wrong secret, and no signature: refused alike through the proxy and directly ------------


@ONLY_49
@pytest.mark.parametrize("keys", [{"access_key": ACCESS_KEY, "secret_key": WRONG_SECRET}, {}],
                         ids=["wrong-secret", "unsigned"])  # fmt: skip
def test_refused_send_looks_the_same_through_the_proxy_as_directly(
    program: ScenarioProgram, proxied: ProxiedCluster, tmp_path_factory: pytest.TempPathFactory,
    keys: dict[str, str],
) -> None:  # fmt: skip
    runs = {}
    with concurrent.futures.ThreadPoolExecutor(2) as pool:  # two clients, mostly JVM start: side by side
        for route, namesrv in (("proxy", proxied.namesrv), ("direct", proxied.cluster.namesrv)):
            topic = unique_name("AclRefused", program.line)
            runs[route] = pool.submit(program.run, "send", namesrv=namesrv, topic=topic, group=f"{topic}-producer",
                                      count=4, manifest=tmp_path_factory.mktemp("manifest") / f"{topic}.tsv",
                                      **keys)  # fmt: skip
    seen: dict[str, dict[str, Any]] = {}
    for route, run in runs.items():
        r = run.result()
        assert "error" in r, f"{route}: a send with {keys or 'no keys'} was not refused\n" + explain(r, proxied)
        assert "error_broker_code" in r, f"{route}: refused, but not by a broker\n" + explain(r, proxied, "error")
        seen[route] = r
        print(f"\n[{program.version}] {'wrong secret' if keys else 'unsigned'} via {route}: "
              f"code={r['error_broker_code']} addr={r['error_broker_addr']}\n  remark={r['error_broker_remark']!r}"
              f"\n  error={r['error'][:400]!r}")

    proxy, direct = seen["proxy"], seen["direct"]
    # the answer came from the proxy's broker ports resp. from a real broker
    low, high = proxied.proxy.broker_ports
    assert low <= _addr_port(proxy["error_broker_addr"]) <= high, proxy["error_broker_addr"]
    assert direct["error_broker_addr"] in proxied.cluster.broker_addrs.values(), direct["error_broker_addr"]

    # Apache 4.9.7: the ACL hook throws, the broker answers SYSTEM_ERROR (1) with the exception text
    assert direct["error_broker_code"] == 1, direct
    assert "org.apache.rocketmq.acl.common.AclException" in direct["error_broker_remark"], direct["error_broker_remark"]
    why = f"Check signature failed for accessKey={ACCESS_KEY}" if keys else "No accessKey is configured"
    assert why in direct["error_broker_remark"], direct["error_broker_remark"]
    assert proxy["error_broker_code"] == direct["error_broker_code"]
    assert _essential(proxy["error_broker_remark"]) == _essential(direct["error_broker_remark"]), (
        f"remark through the proxy:\n  {proxy['error_broker_remark']!r}\n"
        f"directly:\n  {direct['error_broker_remark']!r}")
    # the client's own exception: same classes in the same order (MQClientException <- MQBrokerException ...)
    assert _EXCEPTION_CLASS.findall(proxy["error"]) == _EXCEPTION_CLASS.findall(direct["error"]), (
        f"through the proxy: {proxy['error']}\ndirectly: {direct['error']}")


# -- (c) a refused held pull, on the wire -----------------------------------------------------------


def _signed(ext: dict[str, str], secret: str) -> dict[str, str]:
    """``ext`` signed as AclClientRPCHook does: base64 HmacSHA1 over the values in key order (a pull has no body)."""
    ext = {**ext, "AccessKey": ACCESS_KEY}
    content = "".join(value for _, value in sorted(ext.items())).encode()
    return {**ext, "Signature": base64.b64encode(hmac.new(secret.encode(), content, hashlib.sha1).digest()).decode()}


@pytest.mark.parametrize("secret", [WRONG_SECRET, None], ids=["wrong-secret", "unsigned"])
def test_refused_held_pull_is_answered_like_a_direct_one(proxied: ProxiedCluster, secret: str | None) -> None:
    """A PULL_MESSAGE that asks to be held 3 s (suspend flag), refused by the broker's ACL check:
    through the proxy the same code and remark come back at once, not a PULL_NOT_FOUND at the deadline."""
    with WireClient(proxied.namesrv) as wire:
        answer = wire.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="TBW102")
    assert answer.code == 0, answer.remark
    via_proxy = {b.broker_name: b.broker_addrs[0] for b in TopicRouteData.from_json(answer.body).broker_datas}
    low, high = proxied.proxy.broker_ports
    assert all(low <= _addr_port(a) <= high for a in via_proxy.values()), via_proxy
    header = REQUEST_HEADERS[RequestCode.PULL_MESSAGE]
    ext = header.encode(header.cls(consumer_group="AclPullCg", topic="TBW102", queue_id=0, queue_offset=0,
                                   max_msg_nums=32, sys_flag=PullSysFlag.SUSPEND, commit_offset=0, suspend_timeout_millis=3000,
                                   sub_version=0, subscription="*"))  # fmt: skip
    if secret is not None:
        ext = _signed(ext, secret)
    for name in ("broker-a", "broker-b"):
        seen: dict[str, tuple[int, str | None, float]] = {}
        for route, addr in (("proxy", via_proxy[name]), ("direct", proxied.cluster.broker_addrs[name])):
            host, port = addr.rsplit(":", 1)
            with socket.create_connection((host, int(port)), timeout=10) as sock:
                t0 = time.monotonic()
                answer = roundtrip(sock, RemotingCommand(code=RequestCode.PULL_MESSAGE, opaque=5, ext_fields=ext))
                seen[route] = (answer.code, answer.remark, time.monotonic() - t0)
            print(f"\nheld pull, {'wrong secret' if secret else 'unsigned'}, {name} via {route}: code={answer.code} "
                  f"in {seen[route][2]:.3f}s remark={answer.remark!r}")
        assert seen["direct"][0] == 1 and "AclException" in (seen["direct"][1] or ""), seen
        assert seen["proxy"][:2] == seen["direct"][:2], seen
        assert seen["proxy"][2] < 1.5, f"the refusal came back only after {seen['proxy'][2]:.1f}s through the proxy"
