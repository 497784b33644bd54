"""SQL92 selectors: the grammar and three-valued evaluation of the reference, and on the whole
server the check at a consumer's start, filtered pulls and held pulls woken only by a match."""

from __future__ import annotations

import pytest

from codec.bodies import CheckClientRequestBody, ConsumerData, HeartbeatData, ProducerData, SubscriptionData
from codec.codes import PullSysFlag, RequestCode as C
from codec.codes import ResponseCode as R
from codec.message import decode_messages
from rmqproxy.broker import sql92
from rmqproxy.broker.sql92 import SelectorError, SqlFilter, compile_selector

from .harness import Client
from .harness import send_header

PROPS = {"a": "5", "b": "x", "f": "2.5", "flag": "TRUE", "TAGS": "TagA", "big": "3000000000"}


@pytest.mark.parametrize(("selector", "expected"), [
    ("a = 5", True), ("a > 4 AND a < 6", True), ("a >= 6", False), ("a <> 5", False),
    ("b = 'x'", True), ("b = 'y'", False), ("b <> 'y'", True), ("TAGS = 'TagA'", True),
    ("a BETWEEN 1 AND 5", True), ("a NOT BETWEEN 1 AND 5", False), ("a BETWEEN 6 AND 9", False),
    ("b IN ('x', 'z')", True), ("b NOT IN ('x', 'z')", False), ("b IN ('it''s')", False),
    ("missing IS NULL", True), ("a IS NOT NULL", True), ("a IS NULL", False),
    ("missing = 'x'", False), ("missing <> 'x'", False), ("missing NOT IN ('x')", False),  # NULL: unknown
    ("missing = 'x' OR a = 5", True), ("NOT (missing = 'x')", False), ("NOT (a = 6)", True),
    ("f > 2.0", True), ("f = 2.5", True), ("a = 5.0", True), ("a > -1", True), ("big > 10.0", True), ("big > 2999999999", True),
    ("flag = TRUE", True), ("flag = FALSE", False),
    ("f > 2", False), ("big > 10", False), ("big > 10L", False),  # an int-sized literal (L or not) is an
    # Integer, and Integer.valueOf fails on 2.5 and 3000000000: no match at all
    ("f > 2 OR a = 5", False),  # a failed conversion anywhere: the whole selector does not match
    ("a", False), ("b = 'x' AND a", False),  # a bare property is never TRUE
    ("a = 5 -- trailing comment", True), ("/* c */ a = 5", True),
    ("a=5 and b='x'", True), ("A = 5", False),  # keywords in any case; property names as written
])  # fmt: skip
def test_selector_evaluation_matches_the_reference(selector: str, expected: bool) -> None:
    assert SqlFilter(selector).matches(PROPS) is expected


@pytest.mark.parametrize("selector", [
    "", "a =", "a = NULL", "a > 'x'", "a > TRUE", "a BETWEEN 5 AND 1", "a BETWEEN b AND 5", "5 IN ('x')",
    "a IN (1, 2)", "(a = 1", "a = 0.0", "a = 1 AND", "a LIKE 'x%'", "a = 5 b c", "a == 1", "TRUE = 5", "a = 99999999999999999999",
    "5",
])  # fmt: skip
def test_selectors_the_reference_does_not_compile_are_refused(selector: str) -> None:
    with pytest.raises(SelectorError):
        SqlFilter(selector)


def sql_consumer(server, group: str, topic: str, selector: str) -> Client:
    client = Client(server, f"10.0.0.7@{group}#1")
    sub = SubscriptionData(topic, selector, [], [], 1, "SQL92", False)
    data = HeartbeatData(client.client_id, [ProducerData("CLIENT_INNER_PRODUCER")],
                         [ConsumerData(group, "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_FIRST_OFFSET", [sub], False)])
    assert client.call(C.HEART_BEAT, body=data.to_json()).code == 0
    return client


def check_client(server, selector: str, kind: str | None = "SQL92") -> tuple[int, str | None]:
    sub = SubscriptionData("T", selector, [], [], 1, kind, False)
    answer = Client(server).call(C.CHECK_CLIENT_CONFIG, body=CheckClientRequestBody("10.0.0.5@1#1", "cg", sub).to_json())
    return answer.code, answer.remark


def test_check_client_config_takes_sql92_that_compiles_and_refuses_the_rest(servers, tmp_path) -> None:
    server, _ = servers(tmp_path)
    assert check_client(server, "a > 1")[0] == R.SUCCESS
    code, remark = check_client(server, "a >")
    assert code == R.SUBSCRIPTION_PARSE_FAILED and remark.startswith("Invalid MessageSelector.")
    assert check_client(server, "TagA", "TAG")[0] == R.SUCCESS
    assert check_client(server, "x", "CLASS")[0] == R.SYSTEM_ERROR


def test_with_enable_property_filter_false_sql92_is_refused_at_start_and_at_pull(servers, tmp_path) -> None:
    server, _ = servers(tmp_path, enable_property_filter=False)
    assert check_client(server, "a > 1") == (R.SYSTEM_ERROR, "The broker does not support consumer to filter message by SQL92")
    consumer = sql_consumer(server, "cg", "T", "a > 1")
    Client(server).call(C.SEND_MESSAGE_V2, send_header("T", 0, "a\x012"), b"m")
    answer = consumer.answer(consumer.pull_message("T", 0, expression_type="SQL92", sub_version=1))
    assert answer.code == R.SYSTEM_ERROR


def test_a_pull_returns_only_matching_messages_and_a_held_pull_wakes_only_for_a_match(servers, tmp_path) -> None:
    server, reactor = servers(tmp_path)
    producer = Client(server)
    for i in range(6):
        assert producer.call(C.SEND_MESSAGE_V2, send_header("T", 0, f"a\x01{i}\x02KEYS\x01k{i}"), f"m{i}".encode()).code == 0
    consumer = sql_consumer(server, "cg", "T", "a >= 2 AND a < 5")
    answer = consumer.answer(consumer.pull_message("T", 0, expression_type="SQL92", sub_version=1))
    assert answer.code == R.SUCCESS
    assert [m.body for m in decode_messages(answer.body)] == [b"m2", b"m3", b"m4"]
    none = consumer.answer(consumer.pull_message("T", 5, expression_type="SQL92", sub_version=1))
    assert none.code == R.PULL_RETRY_IMMEDIATELY  # scanned, nothing matched: answered, not held
    opaque = consumer.pull_message("T", 6, expression_type="SQL92", sub_version=1, sys_flag=PullSysFlag.SUSPEND)
    assert consumer.answer(opaque) is None  # held at the queue's end
    producer.call(C.SEND_MESSAGE_V2, send_header("T", 0, "a\x019"), b"no")
    assert consumer.answer(opaque) is None and server.holds.count == 1  # not a match: still held
    producer.call(C.SEND_MESSAGE_V2, send_header("T", 0, "a\x013"), b"yes")
    woken = consumer.answer(opaque)
    assert woken is not None and [m.body for m in decode_messages(woken.body)] == [b"yes"]


def test_an_sql92_pull_before_its_subscription_is_registered_waits_for_the_heartbeat(servers, tmp_path) -> None:
    server, _ = servers(tmp_path)
    producer = Client(server)
    producer.call(C.SEND_MESSAGE_V2, send_header("T", 0, "a\x011"), b"m")
    stranger = Client(server, "10.0.0.8@x#1")
    answer = stranger.answer(stranger.pull_message("T", 0, group="nobody", expression_type="SQL92", sub_version=1))
    assert answer.code == R.SUBSCRIPTION_NOT_EXIST  # served unfiltered, it would get what it did not ask for


def test_a_selector_sent_with_the_pull_filters_it_and_one_that_does_not_compile_is_23(servers, tmp_path) -> None:
    server, _ = servers(tmp_path)
    producer = Client(server)
    for i in range(6):
        producer.call(C.SEND_MESSAGE_V2, send_header("T", 0, f"a\x01{i}"), f"m{i}".encode())
    reader = Client(server, "10.0.0.8@r#1")
    answer = reader.answer(reader.pull_message("T", 0, group="lite", sys_flag=PullSysFlag.SUBSCRIPTION, subscription="a >= 4",
                                expression_type="SQL92", sub_version=1))  # fmt: skip
    assert [m.body for m in decode_messages(answer.body)] == [b"m4", b"m5"]
    bad = reader.answer(reader.pull_message("T", 0, group="lite", sys_flag=PullSysFlag.SUBSCRIPTION, subscription="a >",
                             expression_type="SQL92", sub_version=1))  # fmt: skip
    assert (bad.code, bad.remark) == (R.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed")


def test_a_selector_is_parsed_once_whether_or_not_it_compiles(monkeypatch) -> None:
    """A registered selector that does not compile is met on every pull of its consumers: its
    failure is cached as a success is, and raised anew (no traceback kept growing) each time."""
    parsed: list[str] = []

    class Counting(sql92._Parser):
        def __init__(self, text: str) -> None:
            parsed.append(text)
            super().__init__(text)

    monkeypatch.setattr(sql92, "_Parser", Counting)
    sql92._compiled.cache_clear()  # this test runs once per codec implementation, in one process
    bad, good = "a = /* cached failure */", "a = 1 /* cached success */"
    errors = []
    for _ in range(3):
        with pytest.raises(SelectorError, match="ends too early") as raised:
            compile_selector(bad)
        errors.append(raised.value)
        assert compile_selector(good)({"a": "1"}) is True
    assert parsed == [bad, good]
    assert len({id(e) for e in errors}) == 3


@pytest.mark.parametrize("selector", [
    "(" * 5000 + "a = 1" + ")" * 5000, "NOT " * 3000 + "a = 1", " AND ".join(["a = 1"] * 5000),
    " OR ".join(["a = 1"] * 5000), "(" * (sql92.MAX_NESTING + 1) + "a = 1" + ")" * (sql92.MAX_NESTING + 1),
])  # fmt: skip
def test_a_selector_too_deep_or_too_long_is_refused_not_a_stack_overflow(selector: str) -> None:
    """Parsing and evaluation recurse: a client's selector must not exhaust the stack (it was a
    RecursionError, so every pull of its consumers answered an internal error)."""
    with pytest.raises(SelectorError, match="nests deeper|operators"):
        compile_selector(selector)


def test_selectors_within_the_bounds_compile_and_evaluate_deep_in_a_stack() -> None:
    chain = SqlFilter(" AND ".join(["a = 5"] * (sql92.MAX_OPERATORS // 2)))
    nested = SqlFilter("(" * sql92.MAX_NESTING + "a = 5" + ")" * sql92.MAX_NESTING)
    wide = SqlFilter("b IN (" + ", ".join(f"'v{i}'" for i in range(20_000)) + ", 'x')")  # a list is one operator

    def at_depth(n: int) -> list[bool]:  # a pull is served a few hundred frames down at most
        return at_depth(n - 1) if n else [f.matches(PROPS) for f in (chain, nested, wide)]

    assert at_depth(300) == [True, True, True]
