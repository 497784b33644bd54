"""The store's parts alone, without the facade: the queue table, the flusher, delay parking,
retention, recovery and the reader, each built on real files in a temporary folder."""

from __future__ import annotations

import errno
import json
import threading
from pathlib import Path

import pytest

from codec import message as codec_message  # its hot names: codec.implementation rebinds them
from codec.message import HostPort, Message, decode_message
from rmqproxy.broker.store.commitlog import CommitLog
from rmqproxy.broker.store.flush import Flusher, FlushRound
from rmqproxy.broker.store.index import KeyIndex
from rmqproxy.broker.store.mapped import OpenBudget
from rmqproxy.broker.store.model import GetStatus, StoreConfig, TagFilter
from rmqproxy.broker.store.offsets import ConsumerOffsets
from rmqproxy.broker.store.parking import DelayParking, unparked
from rmqproxy.broker.store.queues import QueueTable
from rmqproxy.broker.store.reads import Reader
from rmqproxy.broker.store.recovery import recover
from rmqproxy.broker.store.retention import Retention

from .conftest import msg

SEGMENT = 64 * 1024


class Parts:
    """A commit log, queue table, index, offsets and parking under one folder, as a store has them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "config").mkdir(parents=True, exist_ok=True)
        self.commitlog = CommitLog(root / "commitlog", SEGMENT)
        self.queues = QueueTable(root / "consumequeue", 64, OpenBudget(64), root / "config" / "dropped.json", None)
        self.queues.load()
        self.index = KeyIndex(root / "index", SEGMENT)
        self.offsets = ConsumerOffsets(root / "config" / "consumerOffset.json")
        self.parking = DelayParking("1s 5s", root / "config" / "delayOffset.json")
        self.parking.load()
        self.next_offset: dict[tuple[str, int], int] = {}

    def append(self, message: Message, tags_code: int = 0, *, dispatch: bool = True) -> int:
        """Write ``message`` to the log (and, with ``dispatch``, its queue entry, as a put does;
        without, as a crash leaves it); its physical offset."""
        key = (message.topic, message.queue_id)
        message.queue_offset = self.next_offset.get(key, 0)
        self.next_offset[key] = message.queue_offset + 1
        message.store_host = HostPort("127.0.0.1", 10911)
        record = codec_message.encode_message(message)
        phys = self.commitlog.append(record)
        message.store_size = len(record)
        if dispatch:
            cq = self.queues.open(*key)
            cq.ensure(message.queue_offset, message.queue_offset)
            cq.put(message.queue_offset, phys, len(record), tags_code)
        return phys

    def close(self) -> None:
        self.commitlog.close()
        self.queues.close()


@pytest.fixture
def parts(tmp_path: Path):
    made = Parts(tmp_path / "store")
    yield made
    made.close()


# --- queue table -------------------------------------------------------------------------


@pytest.mark.parametrize("topic", ["..", "../x", "a/b", "/abs"])
def test_the_queue_table_refuses_a_folder_outside_the_store(parts: Parts, topic: str) -> None:
    with pytest.raises(ValueError, match="outside the store"):
        parts.queues.open(topic, 0)
    with pytest.raises(ValueError):
        parts.queues.directory("T", -1)
    assert parts.queues.keys() == []


def test_a_destroyed_queue_is_recorded_gone_and_forgotten_after_a_checkpoint(parts: Parts) -> None:
    parts.append(msg("T", b"a"))
    parts.append(msg("T", b"b", 1))
    directory = parts.queues.directory("T", 0)
    segments = parts.queues.destroy("T", 0, log_end=1234)
    assert segments and not directory.exists() and parts.queues.keys() == [("T", 1)]
    assert json.loads(parts.queues.dropped_path.read_text()) == [["T", 0, 1234]]
    again = QueueTable(parts.root / "consumequeue", 64, OpenBudget(64), parts.queues.dropped_path, None)
    again.load()
    assert again.dropped == {("T", 0): 1234} and again.keys() == [("T", 1)]
    again.forget_dropped()
    assert again.dropped == {} and not parts.queues.dropped_path.exists()
    again.close()


def test_queue_lookups_answer_for_unknown_queues(parts: Parts) -> None:
    assert parts.queues.max_offset("nope", 0) == 0 and parts.queues.min_offset("nope", 0) == 0
    assert parts.queues.is_empty("nope", 0) and parts.queues.entry("nope", 0, 0) is None
    assert parts.queues.entries("nope", 0, 0, 10) == [] and list(parts.queues.tags_codes("nope", 0, 0)) == []
    phys = parts.append(msg("T", b"a"), tags_code=77)
    assert parts.queues.entry("T", 0, 0)[0] == phys and list(parts.queues.tags_codes("T", 0, 0)) == [(0, 77)]


# --- flusher -------------------------------------------------------------------------------


def make_flusher(parts: Parts, posted: list, snapshot=lambda: (0, set(), {})) -> Flusher:
    return Flusher(parts.root, parts.commitlog, parts.queues, parts.index, parts.offsets, parts.parking,
                   StoreConfig(flush_interval_commit_log_ms=10_000), post=posted.append, snapshot=snapshot,
                   on_round=posted.append, on_fsync=None)  # fmt: skip


def test_a_round_makes_the_log_durable_to_its_end_and_a_checkpoint_writes_the_rest(parts: Parts) -> None:
    parts.append(msg("T", b"a", KEYS="k1"))
    parts.index.add_message("T", "k1", None, 0)
    parts.parking.offsets[0] = 3
    end = parts.commitlog.write_pos
    flusher = make_flusher(parts, [], snapshot=lambda: (end, set(), parts.index.take_pending()))
    assert flusher.round(checkpoint=False, on_owner=True) == FlushRound(end)
    assert flusher.flushed == end and not (parts.root / "checkpoint").exists()
    assert flusher.round(checkpoint=True, on_owner=True) == FlushRound(end)
    assert json.loads((parts.root / "checkpoint").read_text()) == {"physical": end}
    assert json.loads(parts.parking.path.read_text()) == {"0": 3}
    assert parts.index.lookup_many("T", ["k1"]) == {"k1": [0]}


def test_a_failed_fsync_keeps_the_flushed_position_and_hands_back_what_it_did_not_write(parts: Parts, monkeypatch) -> None:
    parts.append(msg("T", b"a"))
    parts.index.add_message("T", "k1", None, 0)
    pending = parts.index.take_pending()
    flusher = make_flusher(parts, [], snapshot=lambda: (parts.commitlog.write_pos, {"cq-file"}, pending))

    def full() -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(parts.commitlog.files, "sync_directory", full)
    round_ = flusher.round(checkpoint=True, on_owner=True)
    assert round_.log_error.errno == errno.ENOSPC and round_.aux_error is None
    assert round_.unwritten_index is pending and round_.unflushed_queues == {"cq-file"}
    assert flusher.flushed == 0 and not (parts.root / "checkpoint").exists()


def test_the_thread_flushes_when_woken_and_hands_the_round_to_the_owner(parts: Parts) -> None:
    rounds: list = []
    arrived = threading.Event()

    def post(fn) -> None:
        fn()
        arrived.set()

    flusher = Flusher(parts.root, parts.commitlog, parts.queues, parts.index, parts.offsets, parts.parking,
                      StoreConfig(flush_interval_commit_log_ms=60_000, checkpoint_interval_ms=60_000), post=post,
                      snapshot=lambda: None, on_round=rounds.append, on_fsync=None)  # fmt: skip
    flusher.start(0)
    try:
        parts.append(msg("T", b"a"))
        flusher.wake()  # the interval is a minute: only the wake can flush now
        assert arrived.wait(10)
    finally:
        flusher.stop()
    assert rounds[0] == FlushRound(parts.commitlog.write_pos) and flusher.flushed == parts.commitlog.write_pos


# --- delay parking -------------------------------------------------------------------------


def test_parking_redirects_a_delayed_message_and_unparking_restores_it(parts: Parts) -> None:
    delayed = msg("T", b"a", 3, DELAY="2")
    parts.parking.park(delayed)
    assert (delayed.topic, delayed.queue_id) == ("SCHEDULE_TOPIC_XXXX", 1)
    assert delayed.properties["REAL_TOPIC"] == "T" and delayed.properties["REAL_QID"] == "3"
    delayed.store_timestamp = 1_000
    assert parts.parking.deliver_time(delayed) == 6_000  # level 2 is 5 s
    back = unparked(delayed)
    assert (back.topic, back.queue_id, back.body) == ("T", 3, b"a") and "DELAY" not in back.properties
    for level in ("0", "x", ""):
        plain = msg("T", b"a", DELAY=level)
        parts.parking.park(plain)
        assert plain.topic == "T"


def test_due_parked_messages_are_put_in_order_and_progress_saved_only_when_it_moves(parts: Parts) -> None:
    for i, due in enumerate((1_000, 2_000, 9_000)):
        parked = msg("T", f"m{i}".encode(), DELAY="1")
        parts.parking.park(parked)
        parts.append(parked, tags_code=due)
    put: list[Message] = []
    look = lambda phys: decode_message(parts.commitlog.read(phys, parts.commitlog.size_at(phys)))[0]  # noqa: E731
    assert parts.parking.deliver_due(parts.queues, 2_500, look, put.append) == 9_000
    assert [m.body for m in put] == [b"m0", b"m1"] and parts.parking.progress(parts.queues) == {1: (2, 3)}
    parts.parking.save()
    assert json.loads(parts.parking.path.read_text()) == {"0": 2}
    parts.parking.path.unlink()
    parts.parking.save()  # nothing moved: nothing written
    assert not parts.parking.path.exists()
    assert parts.parking.deliver_due(parts.queues, 9_000, look, put.append) is None and len(put) == 3
    parts.parking.save()
    assert json.loads(parts.parking.path.read_text()) == {"0": 3}


# --- retention -----------------------------------------------------------------------------


def test_retention_deletes_full_old_segments_only_and_moves_queue_minimums(parts: Parts) -> None:
    now = [1_700_000_000.0]
    retention = Retention(parts.root, parts.commitlog, parts.index, parts.queues,
                          StoreConfig(file_reserved_time_hours=1), lambda: now[0])  # fmt: skip
    body = b"x" * 4000
    while len(parts.commitlog.files.ordered()) < 3:
        m = msg("T", body)
        m.store_timestamp = int(now[0] * 1000)
        parts.append(m)
    assert retention.delete_expired() == 0  # young
    now[0] += 2 * 3600
    assert retention.delete_expired() == 2  # every full segment; never the one being written
    assert len(parts.commitlog.files.ordered()) == 1
    assert parts.queues.min_offset("T", 0) > 0 and parts.queues.entry("T", 0, parts.queues.min_offset("T", 0))
    assert 0 <= retention.disk_ratio() <= 1 and retention.disk_space()[0] > 0


# --- recovery ------------------------------------------------------------------------------


def test_recovery_rebuilds_queues_and_index_and_cuts_a_torn_tail(parts: Parts) -> None:
    for i in range(5):
        parts.append(msg("T", f"m{i}".encode(), i % 2, KEYS=f"k{i}"), dispatch=False)
    good_end = parts.commitlog.write_pos
    parts.commitlog.files.ordered()[-1].mm[good_end : good_end + 8] = b"\x00\x00\x01\x00\xda\xa3\x20\xa7"  # torn
    parts.commitlog.write_pos = good_end + 256
    recovered = recover(parts.commitlog, parts.queues, parts.index, 0, check_crc=True, tags_code=lambda m: 5)
    assert recovered == 5 and parts.commitlog.write_pos == good_end
    assert (parts.queues.max_offset("T", 0), parts.queues.max_offset("T", 1)) == (3, 2)
    assert list(parts.queues.tags_codes("T", 1, 0)) == [(0, 5), (1, 5)]
    assert parts.index.lookup_many("T", ["k3"])["k3"]


def test_recovery_leaves_a_destroyed_queue_empty(parts: Parts) -> None:
    parts.append(msg("T", b"old"), dispatch=False)
    parts.queues.dropped = {("T", 0): parts.commitlog.write_pos}
    parts.append(msg("T", b"new", 1), dispatch=False)
    assert recover(parts.commitlog, parts.queues, parts.index, 0, check_crc=True, tags_code=lambda m: 0) == 1
    assert parts.queues.keys() == [("T", 1)]


# --- reads ---------------------------------------------------------------------------------


def test_the_reader_alone_reads_filters_and_counts(parts: Parts) -> None:
    for i in range(4):
        parts.append(msg("T", f"m{i}".encode()), tags_code=i % 2)
    reader = Reader(parts.queues, parts.commitlog, parts.index, StoreConfig(), memory_limit=1 << 30)
    found = reader.get_message("g", "T", 0, 0, 32, TagFilter(frozenset({1})))
    assert found.status is GetStatus.FOUND and len(found.messages) == 2 and found.next_begin_offset == 4
    assert reader.get_message("g", "T", 0, 4, 32).status is GetStatus.OFFSET_OVERFLOW_ONE
    assert reader.get_message("g", "U", 0, 0, 32).status is GetStatus.NO_MATCHED_LOGIC_QUEUE
    assert reader.count == 2 and reader.message_at("T", 0, 3).body == b"m3"
