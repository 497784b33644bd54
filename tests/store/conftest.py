"""Store test helpers: small segments, a fixed clock, and an in-process crash. Every store test runs
on both codec implementations (tests/implementations.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from codec.message import HostPort, Message
from rmqproxy.broker.store import MessageStore, StoreConfig
from tests import implementations

codec_implementation = implementations.codec_implementation  # autouse: pytest finds it here

SMALL = StoreConfig(
    mapped_file_size_commit_log=64 * 1024,
    mapped_file_size_consume_queue_entries=64,
    flush_interval_commit_log_ms=20,
    checkpoint_interval_ms=20,
)


class FakeClock:
    """Seconds since the epoch, moved by hand."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def msg(topic: str = "T", body: bytes = b"body", queue_id: int = 0, **props: str) -> Message:
    return Message(topic, body, dict(props), queue_id=queue_id, born_host=HostPort("10.0.0.9", 5555), born_timestamp=1)


def crash(store: MessageStore) -> None:
    """Stop a store as a kill -9 would leave it: no final flush, checkpoint or clean marker.
    (Its mapped pages stay in the page cache, as they do when a process dies.)"""
    store.flusher.stop()
    store._closed = True
    store._started = False
    store.commitlog.close()
    store.queue_table.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def open_store(tmp_path: Path, clock: FakeClock) -> Iterator:
    """``open_store(config=SMALL)`` starts a store on ``tmp_path``; all are shut down at the end."""
    opened: list[MessageStore] = []

    def make(config: StoreConfig = SMALL, root: Path = tmp_path / "store") -> MessageStore:
        store = MessageStore(root, config, clock=clock)
        store.start()
        opened.append(store)
        return store

    yield make
    for store in opened:
        if store._started:
            store.shutdown()
