"""The embedded durable message store (commit log, consume queues, offsets, recovery).

``MessageStore`` is the facade; see ``store.py`` for its invariants. The store imports the
codec and nothing of the network layer.
"""

from .store import (
    FLUSH_ASYNC,
    FLUSH_SYNC,
    Arrival,
    CompletionQueue,
    GetResult,
    GetStatus,
    MessageFilter,
    MessageStore,
    PutResult,
    PutStatus,
    PutTicket,
    StoreConfig,
    TagFilter,
    used_ratio,
)

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
