"""Child process of the crash test: writes under SYNC_FLUSH and prints one ACK line per message
the store acknowledged, until it is killed. ``python -m tests.store.crash_writer ROOT FIRST_SEQ``."""

from __future__ import annotations

import sys

from rmqproxy.broker.store import FLUSH_SYNC, MessageStore

from .conftest import SMALL, msg

CONFIG = SMALL.__class__(**{**SMALL.__dict__, "flush_disk_type": FLUSH_SYNC})
QUEUES = [("A", 0), ("A", 1), ("B", 0)]


def payload(seq: int) -> bytes:
    """A body whose every byte depends on ``seq``: a torn or mixed-up body cannot pass for it."""
    size = (seq * 7919) % 9000
    return (f"<{seq:09d}>" * (size // 11 + 1)).encode()[: max(size, 11)]


def main(root: str, first_seq: int) -> None:
    store = MessageStore(root, CONFIG)
    store.start()
    out = sys.stdout
    seq = first_seq

    def acked(result) -> None:
        for m in result.messages:
            out.write(f"ACK {m.topic} {m.queue_id} {m.queue_offset} {m.body[1:10].decode()}\n")
        out.flush()

    while True:
        for _ in range(1 + seq % 8):  # bursts, so fsyncs are shared
            topic, queue_id = QUEUES[seq % len(QUEUES)]
            store.put(msg(topic, payload(seq), queue_id)).add_done_callback(acked)
            seq += 1
        store.completions.run_pending(timeout=1)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
