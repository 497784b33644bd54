"""Transactional send throughput against plain sync sends, with the real Java client, on a
running ``rmqproxy serve``; prints a JSON report (numbers and machine), asserts nothing.

``bench/java/E2eBench.java txsend``: 16 threads of ``sendMessageInTransaction`` (the prepare,
then a COMMIT from the listener, which the client sends one-way), and 16 threads of plain sync
sends, alternated twice for ``--seconds`` each after a warm-up of both. Also reported: whether
the topic holds every message acknowledged (each commit stored exactly once). Target (issue 27):
transactional >= 0.5x plain. Run: ``python bench/transactions.py [--seconds S]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from codec.codes import RequestCode as C  # noqa: E402
from machine import machine  # noqa: E402
from tests.interop.oracle import build_classpath  # noqa: E402
from tests.interop.server import RunningServer  # noqa: E402
from tests.interop.wire import WireClient  # noqa: E402

PROGRAM = Path(__file__).resolve().parent / "java" / "E2eBench.java"


def stored(address: str, topic: str) -> int:
    with WireClient(address) as client:
        return sum(int(client.call(C.GET_MAX_OFFSET, topic=topic, queue_id=q).ext_fields["offset"]) for q in range(8))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=int, default=10)
    args = parser.parse_args(argv)
    conf = {"mappedFileSizeCommitLog": str(1 << 30)}
    with RunningServer(broker_conf=conf, message_delay_level=None) as server:
        out = subprocess.run(["java", "-Xms1g", "-Xmx2g", "-cp", build_classpath("4.9"), str(PROGRAM), "txsend",
                              server.namesrv, "TxBench", str(args.seconds), "16"],
                             capture_output=True, text=True, check=True).stdout  # fmt: skip
        result = json.loads(next(line for line in out.splitlines() if line.startswith("RESULT "))[len("RESULT "):])
        time.sleep(1.0)  # the last one-way commits land
        in_topic = stored(server.namesrv, "TxBench")
    result["ratio"] = round(result["tx_msgs_per_s"] / result["plain_msgs_per_s"], 3)
    result["stored_in_topic"] = in_topic
    result["every_acknowledged_message_stored_once"] = in_topic == result["sent_total"] + 1  # + the first send
    print(json.dumps({"benchmark": "transactions", "machine": machine(), "results": result, "target_ratio": 0.5},
                     indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
