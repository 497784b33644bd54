"""kill -9 a process writing under SYNC_FLUSH at random moments, many times: every acknowledged
message must read back intact, and nothing corrupt is ever served. The test runs once per codec
implementation (tests/implementations.py), with KILLS kills each: 50 in all by default."""

from __future__ import annotations

import os
import random
import subprocess
import sys

from codec.message import decode_messages
from rmqproxy.broker.store import GetStatus, MessageStore

from tests.implementations import child_env

from .crash_writer import CONFIG, QUEUES, payload

KILLS = int(os.environ.get("RMQ_CRASH_KILLS", "25"))


def read_queue(store: MessageStore, topic: str, queue_id: int) -> list:
    messages, offset = [], store.min_offset(topic, queue_id)
    while True:
        r = store.get_message("verify", topic, queue_id, offset, 32)
        if r.status != GetStatus.FOUND:
            # The end of the queue; or no queue; or a queue whose file a put created but whose
            # first entry the kill left unwritten (never acknowledged): empty, max offset 0.
            empty = r.status == GetStatus.NO_MESSAGE_IN_QUEUE and r.max_offset == 0 and not messages
            assert empty or r.status in (GetStatus.OFFSET_OVERFLOW_ONE, GetStatus.NO_MATCHED_LOGIC_QUEUE), r
            return messages
        messages += decode_messages(r.body, check_crc=True)
        offset = r.next_begin_offset


def test_acknowledged_messages_survive_kill_9(tmp_path) -> None:
    seed = int(os.environ.get("RMQ_CRASH_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    root = tmp_path / "store"
    acked: dict[tuple[str, int, int], int] = {}
    next_seq = 0
    env = child_env({**os.environ, "PYTHONPATH": os.getcwd()})
    for kill in range(KILLS):
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.store.crash_writer", str(root), str(next_seq)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        wanted = rng.randint(1, 80)
        seen = 0
        for line in child.stdout:
            _, topic, queue_id, offset, seq = line.split()
            acked[(topic, int(queue_id), int(offset))] = int(seq)
            seen += 1
            if seen >= wanted:
                break
        child.kill()
        child.wait()
        assert seen >= wanted, f"writer died early (seed {seed}, kill {kill})"

        store = MessageStore(root, CONFIG)
        store.start()
        try:
            for topic, queue_id in QUEUES:
                messages = read_queue(store, topic, queue_id)
                assert [m.queue_offset for m in messages] == list(range(len(messages))), f"seed {seed}"
                for m in messages:  # every served message is one the writer wrote, whole
                    seq = int(m.body[1:10])
                    assert m.body == payload(seq) and m.topic == topic, f"seed {seed}"
                    next_seq = max(next_seq, seq + 1)
            for (topic, queue_id, offset), seq in acked.items():
                stored = store.message_at(topic, queue_id, offset)
                assert stored is not None and stored.body == payload(seq), f"lost ack (seed {seed}, kill {kill})"
        finally:
            store.shutdown()
    assert len(acked) >= KILLS
