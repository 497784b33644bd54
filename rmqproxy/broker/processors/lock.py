"""LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42) for orderly consumers (docs/protocol.md, Locks).

Only real queues are locked: a queue of a topic this broker does not have, of another broker or
past the topic's queue count is left out of ``lockOKMQSet`` (the client takes it as not locked)
and never enters the lock table, so no client can grow that table with made-up queues. A group
name the broker would not accept is answered SUBSCRIPTION_GROUP_NOT_EXIST.
"""

from __future__ import annotations

from codec.bodies import LockBatchRequestBody, LockBatchResponseBody, MessageQueue, UnlockBatchRequestBody
from codec.codes import RequestCode, ResponseCode
from codec.command import RemotingCommand

from ...net.dispatch import Route
from ..locktable import LockManager
from ..topics import TopicTable
from ...core.names import check_group_name


class LockProcessor:
    def __init__(self, locks: LockManager, topics: TopicTable, broker_name: str) -> None:
        self.locks = locks
        self.topics = topics
        self.broker_name = broker_name

    def routes(self) -> list[Route]:
        """This processor's entries of the dispatch table."""
        return [
            Route(RequestCode.LOCK_BATCH_MQ, self.lock),
            Route(RequestCode.UNLOCK_BATCH_MQ, self.unlock),
        ]

    def lock(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        body = LockBatchRequestBody.from_json(request.body)
        group = body.consumer_group or ""
        if check_group_name(group) is not None:
            return request.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}")
        real = [mq for mq in body.mq_set if self._real(mq)]
        held = self.locks.lock(group, body.client_id or "", real, conn)
        return request.response(ResponseCode.SUCCESS, body=LockBatchResponseBody(held).to_json())

    def unlock(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        body = UnlockBatchRequestBody.from_json(request.body)
        self.locks.unlock(body.consumer_group or "", body.client_id or "", body.mq_set)
        return request.response(ResponseCode.SUCCESS)

    def _real(self, mq: MessageQueue) -> bool:
        """A queue this broker has: its broker name, an existing topic, a queue id in range."""
        topic = self.topics.get(mq.topic)
        return mq.broker_name == self.broker_name and topic is not None and 0 <= mq.queue_id < topic.queue_count
