"""The proxy's relay in process: what one relayed send costs the proxy's reactor thread, without
sockets, the client or the broker; prints a JSON report (numbers and machine), asserts nothing.

SEND_MESSAGE_V2 frames as the Java 4.9 client writes them (``send_frames.frames``: JSON header, 1
KiB body) go into a proxy's broker listener on the test harness (``tests/proxy/harness.py``: a
``BrokerSession`` on ``StringTransport`` both sides, metrics on, pull log off) in reads of 8, the
pipelining of 16 sending threads; what reaches the fake broker is answered as a 4.9.7 broker
answers a send (msgId, queueId, queueOffset, region, trace), 8 answers a read. Only the proxy's two
calls per read (the client's bytes in, the broker's bytes in) are timed, in CPU time of this
thread; making the answers is not. The first tenth warms up.

Each measurement runs in a process of its own: the codec implementation of this tree
(``--implementation``), and with ``--against-tree DIR`` the same measurement of another checkout
(its own harness and code; build its compiled codec first), each with the same implementations, all
interleaved ``--runs`` times so drift hits each alike. Run: ``python bench/relay.py [--messages N]
[--runs N] [--implementation pure|compiled|both] [--against-tree DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
TREE = Path(os.environ.get("RMQPROXY_BENCH_TREE") or BENCH.parent)  # the checkout measured
sys.path.insert(0, str(TREE))
sys.path.insert(1, str(BENCH))

from machine import commit, machine  # noqa: E402

FRAMES_PER_READ = 8


def measure(messages: int) -> dict:
    """CPU microseconds of the proxy per relayed send (request in, answer back), in this process."""
    from codec.codes import ResponseCode
    from codec.peer import RemotingPeer
    from rmqproxy.proxy.nodes import Node
    from send_frames import frames
    from tests.proxy.harness import ProxyClient, make_proxy

    with tempfile.TemporaryDirectory() as tmp:
        proxy, reactor, _events = make_proxy(Path(tmp))
        client = ProxyClient(proxy, reactor, Node("broker-a", 0, "10.1.0.1:10911", 10911, "127.0.0.1:10911"))
        data = frames(messages)
        reads = [b"".join(data[i : i + FRAMES_PER_READ]) for i in range(0, len(data), FRAMES_PER_READ)]
        broker = RemotingPeer()
        client_in, broker_in = client.conn.dataReceived, client.broker.conn.dataReceived
        upstream, downstream = client.broker.transport, client.transport
        warm = len(reads) // 10
        spent = 0.0
        offset = 0
        for k, read in enumerate(reads):
            began = time.thread_time()
            client_in(read)
            spent += time.thread_time() - began
            answers = []
            for incoming in broker.receive(upstream.value()):
                offset += 1
                answers.append(incoming.command.response(ResponseCode.SUCCESS, None, {
                    "msgId": "7F00000100002A9F0000000000000000", "queueId": "1", "queueOffset": str(offset),
                    "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}).encode())  # fmt: skip
            upstream.clear()
            answer = b"".join(answers)
            began = time.thread_time()
            broker_in(answer)
            spent += time.thread_time() - began
            answered = downstream.value().count(b'"msgId"')
            downstream.clear()
            if answered != len(answers):
                raise SystemExit(f"read {k}: {answered} answers reached the client of {len(answers)}")
            if k == warm - 1:
                spent = 0.0
        timed = (len(reads) - warm) * FRAMES_PER_READ
    return {"messages_timed": timed, "cpu_us_per_relayed_send": round(spent / timed * 1e6, 2)}


def run_one(tree: Path, kind: str, messages: int) -> dict:
    """``measure`` in a child process on ``tree`` with the ``kind`` codec."""
    env = {**os.environ, "RMQPROXY_BENCH_TREE": str(tree), "PYTHONPATH": str(tree)}
    env.pop("RMQPROXY_PURE_PYTHON", None)
    if kind == "pure":
        env["RMQPROXY_PURE_PYTHON"] = "1"
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--one", "--messages", str(messages)],
                         env=env, capture_output=True, text=True, check=True).stdout  # fmt: skip
    return json.loads(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3, help="measurements of each")
    parser.add_argument("--implementation", choices=["pure", "compiled", "both"], default="both")
    parser.add_argument("--against-tree", type=Path, help="another checkout to measure the same way")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        from codec import implementation

        print(json.dumps({**measure(args.messages), "codec": implementation.describe()}))
        return
    kinds = ["compiled", "pure"] if args.implementation == "both" else [args.implementation]
    subjects = [(f"this tree, {kind}", TREE, kind) for kind in kinds]
    if args.against_tree is not None:
        other = f"{args.against_tree} ({commit(args.against_tree)})"
        subjects += [(f"{other}, {kind}", args.against_tree.resolve(), kind) for kind in kinds]
    runs: dict[str, list[dict]] = {name: [] for name, _, _ in subjects}
    for _ in range(args.runs):
        for name, tree, kind in subjects:
            runs[name].append(run_one(tree, kind, args.messages))
    results = {
        name: {"cpu_us_per_relayed_send": statistics.median(r["cpu_us_per_relayed_send"] for r in reports),
               "runs": [r["cpu_us_per_relayed_send"] for r in reports], "codec": reports[0]["codec"]}
        for name, reports in runs.items()
    }  # fmt: skip
    print(json.dumps({"benchmark": "relay", "commit": commit(), "machine": machine(), "messages": args.messages,
                      "frames_per_read": FRAMES_PER_READ, "results": results}, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
