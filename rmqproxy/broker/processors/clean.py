"""CLEAN_EXPIRED_CONSUMEQUEUE (306), CLEAN_UNUSED_TOPIC (316), DELETE_EXPIRED_COMMITLOG (329):
mqadmin ``cleanExpiredCQ``, ``cleanUnusedTopic`` and ``deleteExpiredCommitLog`` on the store
(docs/operations.md, "Cleaning the store").

- 329 deletes now the commit-log segments retention would delete on its next tick (those whose
  newest message is older than ``fileReservedTime``), as the reference's manual delete does.
- 306 drops consume-queue files and entries below the commit log's min offset, and destroys the
  queues of topics no longer in the topic table that hold nothing readable.
- 316 destroys every queue of a topic no longer in the topic table (a deleted topic), and the
  committed offsets on it.

Nothing a consumer can read is touched: a topic in the table keeps its queues and offsets, and
the broker's own topics (delay levels, timers, transactions) are never cleaned. All answer 0, as
the reference answers; mqadmin prints ``success``.
"""

from __future__ import annotations

from twisted.logger import Logger

from codec.codes import RequestCode, ResponseCode
from codec.command import RemotingCommand

from ...net.dispatch import Route
from ..store import MessageStore
from ...core.delay_levels import SCHEDULE_TOPIC, TIMER_TOPIC
from ..topics import TopicTable
from ...core.names import HALF_TOPIC, OP_TOPIC, is_system_topic

log = Logger()

#: Topics the store itself writes, whatever the topic table says.
STORE_TOPICS = frozenset({SCHEDULE_TOPIC, TIMER_TOPIC, HALF_TOPIC, OP_TOPIC})


def in_use(topics: TopicTable, topic: str) -> bool:
    """Whether ``topic``'s queues must stay: it is in the topic table, or the broker's own."""
    return topics.get(topic) is not None or topic in STORE_TOPICS or is_system_topic(topic)


class CleanProcessor:
    def __init__(self, store: MessageStore, topics: TopicTable) -> None:
        self.store = store
        self.topics = topics

    def routes(self) -> list[Route]:
        """This processor's entries of the dispatch table."""
        return [
            Route(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE, self.clean_expired_consume_queue),
            Route(RequestCode.CLEAN_UNUSED_TOPIC, self.clean_unused_topic),
            Route(RequestCode.DELETE_EXPIRED_COMMITLOG, self.delete_expired_commit_log),
        ]

    def in_use(self, topic: str) -> bool:
        return in_use(self.topics, topic)

    def clean_expired_consume_queue(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        self.store.correct_min_offsets()
        expired = [(t, q) for t, q in self.store.queues() if not self.in_use(t) and self.store.queue_is_empty(t, q)]
        return self._destroy(request, expired)

    def clean_unused_topic(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        return self._destroy(request, [(t, q) for t, q in self.store.queues() if not self.in_use(t)])

    def delete_expired_commit_log(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        deleted = self.store.delete_expired()
        log.info("deleteExpiredCommitLog: {n} commit-log segments deleted, min offset now {min}",
                 n=deleted, min=self.store.min_physical_offset)  # fmt: skip
        return request.response(ResponseCode.SUCCESS)

    def _destroy(self, request: RemotingCommand, queues: list[tuple[str, int]]) -> RemotingCommand:
        problem = destroy_queues(self.store, queues)
        if problem is not None:
            return request.response(ResponseCode.SYSTEM_ERROR, problem)
        return request.response(ResponseCode.SUCCESS)


def destroy_queues(store: MessageStore, queues: list[tuple[str, int]]) -> str | None:
    """Destroy ``queues``, then forget the offsets of each topic left without a queue; why one
    could not be destroyed, or None. A queue a SYNC_FLUSH put waits on is left (logged) for a
    later cleanUnusedTopic."""
    touched = set()
    for topic, queue_id in queues:
        try:
            if not store.destroy_queue(topic, queue_id):
                log.warn("not destroying {topic}:{queue}: a put to it waits for its flush", topic=topic, queue=queue_id)
                continue
        except OSError as exc:
            return f"cannot clean {topic}:{queue_id}: {exc}"
        touched.add(topic)
        log.info("consume queue {topic}:{queue} destroyed (its topic is gone)", topic=topic, queue=queue_id)
    left = {t for t, _ in store.queues()}
    for topic in touched - left:
        store.offsets.remove_topic(topic)
    return None
