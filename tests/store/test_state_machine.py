"""Random puts, reads, clean restarts, crashes and torn tails against a plain in-memory model."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from codec.message import decode_messages
from rmqproxy.broker.store import GetStatus, MessageStore

from .conftest import SMALL, FakeClock, crash, msg

CONFIG = dataclasses.replace(SMALL, mapped_file_size_consume_queue_entries=16, checkpoint_interval_ms=5)
QUEUES = [("A", 0), ("A", 1), ("B", 0)]


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="rmqproxy-sm-"))
        self.clock = FakeClock()
        self.model: dict[tuple[str, int], list[bytes]] = {q: [] for q in QUEUES}
        self.order: list[tuple[str, int]] = []  # queue of every put, in commit-log order
        self.seq = 0
        self.store = self._open()

    def _open(self) -> MessageStore:
        store = MessageStore(self.root, CONFIG, clock=self.clock)
        store.start()
        return store

    def _body(self, size: int) -> bytes:
        self.seq += 1
        return f"#{self.seq}#".encode() + bytes(size)

    @rule(queue=st.sampled_from(QUEUES), size=st.integers(0, 6000))
    def put(self, queue, size) -> None:
        body = self._body(size)
        result = self.store.put(msg(queue[0], body, queue[1])).result
        assert result.ok and result.first_queue_offset == len(self.model[queue])
        self.model[queue].append(body)
        self.order.append(queue)

    @rule(queue=st.sampled_from(QUEUES), sizes=st.lists(st.integers(0, 2000), min_size=1, max_size=5))
    def put_batch(self, queue, sizes) -> None:
        bodies = [self._body(size) for size in sizes]
        result = self.store.put_batch([msg(queue[0], b, queue[1]) for b in bodies]).result
        assert result.ok and result.first_queue_offset == len(self.model[queue])
        self.model[queue] += bodies
        self.order += [queue] * len(bodies)

    @rule(queue=st.sampled_from(QUEUES), data=st.data(), max_msgs=st.integers(1, 40))
    def read(self, queue, data, max_msgs) -> None:
        bodies = self.model[queue]
        offset = data.draw(st.integers(0, len(bodies) + 2))
        r = self.store.get_message("g", queue[0], queue[1], offset, max_msgs)
        if not bodies:
            assert r.status in (GetStatus.NO_MATCHED_LOGIC_QUEUE, GetStatus.NO_MESSAGE_IN_QUEUE)
            assert r.next_begin_offset == 0
        elif offset >= len(bodies):
            expected = GetStatus.OFFSET_OVERFLOW_ONE if offset == len(bodies) else GetStatus.OFFSET_OVERFLOW_BADLY
            assert (r.status, r.next_begin_offset) == (expected, min(offset, len(bodies)))
        else:
            per_file = CONFIG.mapped_file_size_consume_queue_entries
            count = min(max_msgs, 32, len(bodies) - offset, per_file - offset % per_file)
            assert r.status == GetStatus.FOUND
            assert [m.body for m in decode_messages(r.body, check_crc=True)] == bodies[offset : offset + count]
            assert r.next_begin_offset == offset + count
        assert (r.min_offset, r.max_offset) == (0, len(bodies)) or not bodies

    @rule()
    def clean_restart(self) -> None:
        self.store.shutdown()
        self.store = self._open()
        assert self.store.recovered_records == 0

    @rule()
    def crash_restart(self) -> None:
        crash(self.store)
        self.store = self._open()

    @precondition(lambda self: self.order)
    @rule(keep=st.integers(1, 40))
    def crash_with_torn_tail(self, keep) -> None:
        """Die while the last record was being written: only its first ``keep`` bytes reached the
        file. Only possible past the checkpoint (everything before it was fsynced first)."""
        queue = self.order[-1]
        last = self.store.message_at(queue[0], queue[1], len(self.model[queue]) - 1)
        crash(self.store)
        checkpoint = json.loads((self.root / "checkpoint").read_text())["physical"]
        if last.physical_offset >= checkpoint:
            size = CONFIG.mapped_file_size_commit_log
            path = self.root / "commitlog" / f"{last.physical_offset - last.physical_offset % size:020d}"
            fd = os.open(path, os.O_WRONLY)
            try:
                os.pwrite(fd, bytes(last.store_size - keep), last.physical_offset % size + keep)
            finally:
                os.close(fd)
            self.model[queue].pop()
            self.order.pop()
            event("tore the last record")
        self.store = self._open()

    @invariant()
    def every_queue_has_exactly_the_model(self) -> None:
        for (topic, queue_id), bodies in self.model.items():
            assert self.store.max_offset(topic, queue_id) == len(bodies)

    def teardown(self) -> None:
        if self.store._started:
            self.store.shutdown()
        shutil.rmtree(self.root, ignore_errors=True)


MACHINE_SETTINGS = settings(
    max_examples=int(os.environ.get("RMQ_SM_EXAMPLES", "40")), stateful_step_count=30, deadline=None
)


def test_store_matches_its_model() -> None:
    """A plain test rather than ``StoreMachine.TestCase``, so that it runs on each codec implementation
    (a unittest case takes no parametrized fixture)."""
    run_state_machine_as_test(StoreMachine, settings=MACHINE_SETTINGS)
