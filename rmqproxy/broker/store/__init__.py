"""The embedded durable message store (commit log, consume queues, offsets, recovery).

``MessageStore`` (``store.py``) is the facade, with the store's invariants; ``model.py`` holds the
types callers see. The store imports the codec and the core, and nothing of the network layer.
"""

from ...core.config import FLUSH_ASYNC, FLUSH_SYNC
from ...core.hold import Arrival
from .model import (
    CompletionQueue,
    GetResult,
    GetStatus,
    MessageFilter,
    PutResult,
    PutStatus,
    PutTicket,
    StoreConfig,
    TagFilter,
)
from .retention import used_ratio
from .store import MessageStore

__all__ = [
    "FLUSH_ASYNC",
    "FLUSH_SYNC",
    "Arrival",
    "CompletionQueue",
    "GetResult",
    "GetStatus",
    "MessageFilter",
    "MessageStore",
    "PutResult",
    "PutStatus",
    "PutTicket",
    "StoreConfig",
    "TagFilter",
    "used_ratio",
]
