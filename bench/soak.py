"""Soak: hostile frames, kill -9 under SYNC_FLUSH, a client that stops reading; prints a JSON report.

1. ``--frames`` (default 1,000,000) hostile frames (``tests/robustness/hostile.py``) against
   ``rmqproxy serve``, with a checker client verifying a route, a send and a pull every 1,000
   frames: frames tried, wrong answers, crashes (the server died), RSS before and at peak;
2. ``--kills`` (default 50) kill -9 of a SYNC_FLUSH server at random moments while a client sends,
   each followed by a restart on the same store; then every acknowledged message is read back:
   acknowledged, lost, and read back unacknowledged (sent but unanswered when the server died);
3. the stalled reader of ``tests/security/test_stalled_reader.py`` (pipelined 128 KiB pulls that
   are never read): server RSS before and at peak.

Targets (issue 24): 0 crashes, 0 acknowledged lost over 50 kills, stalled-reader RSS at most 64 MiB
above its baseline. Run: ``python bench/soak.py [--frames N] [--kills N] [--seed S]``.
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine import machine  # noqa: E402

from codec.codes import RequestCode as C  # noqa: E402
from codec.codes import ResponseCode as R  # noqa: E402
from codec.headers import REQUEST_HEADERS, PullMessageResponseHeader  # noqa: E402
from codec.message import decode_messages  # noqa: E402
from tests.interop.server import RunningServer  # noqa: E402
from tests.interop.wire import WireClient  # noqa: E402
from tests.robustness.hostile import flood  # noqa: E402
from tests.robustness.test_fuzz import Checker  # noqa: E402
from tests.security.test_stalled_reader import pull_requests  # noqa: E402


def fuzz(frames: int, seed: int) -> dict:
    with RunningServer() as server, WireClient(server.namesrv) as wire:
        host, port = server.namesrv.rsplit(":", 1)
        checker = Checker(wire)
        checker()
        before = peak = server.rss
        started = time.perf_counter()

        def between(sent: int) -> None:
            nonlocal peak
            if sent % 1000 == 0:
                checker()
                peak = max(peak, server.rss)

        crashed = False
        try:
            sent = flood((host, int(port)), frames, seed, between=between)
        except OSError:
            sent, crashed = -1, True
        crashed = crashed or not server.alive()
        return {"frames_tried": sent, "seconds": round(time.perf_counter() - started, 1), "crashes": int(crashed),
                "checks": checker.checks, "wrong_answers": len(checker.wrong), "rss_before_mib": before >> 20,
                "rss_peak_mib": peak >> 20}  # fmt: skip


def _send_header(queue_id: int = 0) -> dict:
    header = REQUEST_HEADERS[C.SEND_MESSAGE_V2].cls(
        producer_group="soak", topic="Soak", default_topic="TBW102", default_topic_queue_nums=1, queue_id=queue_id,
        sys_flag=0, born_timestamp=1, flag=0, properties="",
    )  # fmt: skip
    return vars(header)


def kills(count: int, seed: int) -> dict:
    """Send continuously to a SYNC_FLUSH server and kill -9 it ``count`` times."""
    rng = random.Random(seed)
    acked: set[bytes] = set()
    tried = 0
    stop = threading.Event()
    with RunningServer(broker_conf={"flushDiskType": "SYNC_FLUSH"}) as server:

        def produce() -> None:
            nonlocal tried
            while not stop.is_set():
                try:
                    with WireClient(server.namesrv, timeout=2) as wire:
                        while not stop.is_set():
                            body = f"soak-{tried}".encode()
                            tried += 1
                            if wire.call(C.SEND_MESSAGE_V2, body=body, **_send_header()).code == R.SUCCESS:
                                acked.add(body)
                except (OSError, AssertionError):
                    time.sleep(0.05)  # the server is down: try again

        sender = threading.Thread(target=produce, daemon=True)
        sender.start()
        for _ in range(count):
            time.sleep(rng.uniform(0.2, 1.0))
            server.kill()
            server.start()
        stop.set()
        sender.join(timeout=10)
        read: set[bytes] = set()
        with WireClient(server.namesrv) as wire:
            offset = 0
            while True:
                answer = wire.call(C.PULL_MESSAGE, consumer_group="soak", topic="Soak", queue_id=0,
                                   queue_offset=offset, max_msg_nums=32, sys_flag=0, commit_offset=0,
                                   suspend_timeout_millis=0, sub_version=0)  # fmt: skip
                if answer.code != R.SUCCESS:
                    break
                read.update(m.body for m in decode_messages(answer.body))
                offset = PullMessageResponseHeader.from_ext(answer.ext_fields).next_begin_offset
    return {"kills": count, "flush": "SYNC_FLUSH", "sends_tried": tried, "acknowledged": len(acked),
            "acknowledged_lost": len(acked - read), "read_back_unacknowledged": len(read - acked)}  # fmt: skip


def stalled_reader(pulls: int = 5000) -> dict:
    with RunningServer() as server:
        with WireClient(server.namesrv) as wire:
            for _ in range(32):
                wire.call(C.SEND_MESSAGE_V2, body=bytes(4096), **{**_send_header(), "topic": "Big"})
        before = peak = server.rss
        host, port = server.namesrv.rsplit(":", 1)
        with socket.create_connection((host, int(port))) as hog:
            hog.sendall(pull_requests(pulls))
            until = time.monotonic() + 3
            while time.monotonic() < until:
                peak = max(peak, server.rss)
                time.sleep(0.05)
    return {"pipelined_pulls": pulls, "reply_mib_if_buffered": pulls * 32 * 4096 >> 20, "rss_before_mib": before >> 20,
            "rss_peak_mib": peak >> 20, "rss_growth_mib": (peak - before) >> 20}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--seed", type=int, default=24)
    args = parser.parse_args(argv)
    report = {"benchmark": "soak", "machine": machine(), "fuzz": fuzz(args.frames, args.seed),
              "kill9": kills(args.kills, args.seed), "stalled_reader": stalled_reader()}  # fmt: skip
    report["targets"] = {"crashes": 0, "acknowledged_lost": 0, "stalled_reader_rss_growth_mib_max": 64}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
