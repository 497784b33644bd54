"""SQL92-filtered pulls, in process on the real server (fake reactor, real store); prints a JSON
report (numbers and machine), asserts nothing.

A queue of ``--messages`` 1 KiB messages with user properties (n, color, size) is pulled from
start to end, 32 at a time, by a consumer whose SQL92 selector matches a third of them, and by one
that takes every message (``*``) for comparison; interleaved, ``--rounds`` times. Reported:
messages evaluated per second (entries the pulls examined), matches per second, and the same
for the unfiltered consumer. Target (issue 27): >= 50,000 messages evaluated per second.
Run: ``python bench/sql92.py [--messages N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from codec.bodies import ConsumerData, HeartbeatData, ProducerData, build_subscription  # noqa: E402
from codec.codes import RequestCode as C  # noqa: E402
from codec.codes import ResponseCode as R  # noqa: E402
from codec.headers import PullMessageResponseHeader  # noqa: E402
from machine import machine  # noqa: E402
from tests.server.harness import Client, make_server  # noqa: E402
from tests.server.test_broker import pull, send_header  # noqa: E402

SELECTOR = "color = 'red' AND n >= 0"
COLORS = ("red", "green", "blue")


def subscribe(client: Client, group: str, expression: str, kind: str) -> None:
    sub = build_subscription("Bench", expression, 1)
    sub.expression_type = kind
    if kind != "TAG":
        sub.sub_string, sub.tags_set, sub.code_set = expression, [], []
    data = HeartbeatData(client.client_id, [ProducerData("CLIENT_INNER_PRODUCER")],
                         [ConsumerData(group, "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_FIRST_OFFSET", [sub], False)])
    assert client.call(C.HEART_BEAT, body=data.to_json()).code == 0


def drain(client: Client, group: str, kind: str, end: int) -> tuple[float, int, int]:
    """Pull the queue from 0 to ``end``: (seconds, entries examined, messages returned)."""
    offset, returned = 0, 0
    started = time.perf_counter()
    while offset < end:
        answer = client.answer(pull(client, "Bench", offset, group=group, expression_type=kind, sub_version=1))
        client.received.clear()
        header = PullMessageResponseHeader.from_ext(answer.ext_fields)
        if answer.code == R.SUCCESS:
            returned += _records(answer.body)
        offset = header.next_begin_offset
    return time.perf_counter() - started, end, returned


def _records(body: bytes) -> int:
    count, at = 0, 0
    while at < len(body):
        at += int.from_bytes(body[at:at + 4], "big")
        count += 1
    return count


def run(messages: int, rounds: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        server, _reactor = make_server(Path(tmp))
        try:
            producer = Client(server, "10.0.0.5@producer#1")
            body = b"x" * 1024
            for i in range(messages):
                props = f"n\x01{i}\x02color\x01{COLORS[i % 3]}\x02size\x01{'big' if i % 2 else 'small'}"
                producer.send(C.SEND_MESSAGE_V2, send_header("Bench", 0, props), body)
                if i % 1000 == 0:
                    producer.transport.clear()
            sql, everything = Client(server, "10.0.0.6@sql#1"), Client(server, "10.0.0.7@all#1")
            subscribe(sql, "sql", SELECTOR, "SQL92")
            subscribe(everything, "all", "*", "TAG")
            end = server.store.max_offset("Bench", 0)
            drain(sql, "sql", "SQL92", min(end, 2000))  # warm-up
            filtered, unfiltered = [], []
            for _ in range(rounds):
                filtered.append(drain(sql, "sql", "SQL92", end))
                unfiltered.append(drain(everything, "all", "TAG", end))
        finally:
            server.stop()
    seconds = statistics.median(r[0] for r in filtered)
    plain = statistics.median(r[0] for r in unfiltered)
    return {
        "messages": messages, "selector": SELECTOR, "rounds": rounds,
        "sql92_evaluated_per_s": round(messages / seconds), "sql92_matched": filtered[0][2],
        "sql92_matched_per_s": round(filtered[0][2] / seconds),
        "unfiltered_msgs_per_s": round(messages / plain), "unfiltered_returned": unfiltered[0][2],
        "target_evaluated_per_s": 50_000,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=60_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    report = {"benchmark": "sql92", "machine": machine(), "results": run(args.messages, args.rounds)}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
