"""Soak: hostile frames, kill -9 under SYNC_FLUSH, a client that stops reading; prints a JSON report.

1. ``--frames`` (default 1,000,000) hostile frames (``tests/robustness/hostile.py``) against
   ``rmqproxy serve``, with a checker client verifying a route, a send and a pull every 1,000
   frames: frames tried, wrong answers, crashes (the server died), RSS before and at peak;
2. ``--kills`` (default 50) kill -9 of a SYNC_FLUSH server at random moments while a client sends,
   each followed by a restart on the same store; then every acknowledged message is read back:
   acknowledged, lost, and read back unacknowledged (sent but unanswered when the server died);
3. the stalled readers of ``tests/security/test_stalled_reader.py``: pipelined 128 KiB pulls that
   are never read, and 1,000 held pulls woken by a 1 MiB message while their client reads
   nothing: server RSS before and at peak, and how the held ones were answered.

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

from codec.codes import ResponseCode as R  # noqa: E402
from codec.headers import PullMessageResponseHeader  # noqa: E402
from codec.message import decode_messages  # noqa: E402
from tests.interop.server import RunningServer  # noqa: E402
from tests.interop.wire import WireClient  # noqa: E402
from tests.robustness.hostile import flood  # noqa: E402
from tests.robustness.test_fuzz import Checker  # noqa: E402
from tests.security.test_stalled_reader import HELD, pull_requests, wake_held_pulls_unread  # noqa: E402


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
                            if wire.send("Soak", body, group="soak").code == R.SUCCESS:
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
                answer = wire.pull("soak", "Soak", 0, offset)
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
                wire.send("Big", bytes(4096), group="soak")
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


def held_wake_unread(held: int = HELD) -> dict:
    with RunningServer() as server:
        answers, before, peak = wake_held_pulls_unread(server, held)
    codes = [a.code for a in answers]
    return {"held_pulls": held, "reply_mib_if_buffered": held, "answered_in_full": codes.count(R.SUCCESS),
            "system_busy": codes.count(R.SYSTEM_BUSY), "rss_before_mib": before >> 20, "rss_peak_mib": peak >> 20,
            "rss_growth_mib": (peak - before) >> 20}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--seed", type=int, default=24)
    args = parser.parse_args(argv)
    report = {"benchmark": "soak", "machine": machine(), "fuzz": fuzz(args.frames, args.seed),
              "kill9": kills(args.kills, args.seed), "stalled_reader": stalled_reader(),
              "held_wake_unread": held_wake_unread()}  # fmt: skip
    report["targets"] = {"crashes": 0, "acknowledged_lost": 0, "stalled_reader_rss_growth_mib_max": 64}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
