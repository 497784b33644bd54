"""LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42) for orderly consumers (PROTOCOL.md §4.8)."""

from __future__ import annotations

from codec.bodies import LockBatchRequestBody, LockBatchResponseBody, UnlockBatchRequestBody
from codec.codes import ResponseCode
from codec.command import RemotingCommand

from ..locks import LockManager


class LockProcessor:
    def __init__(self, locks: LockManager) -> None:
        self.locks = locks

    def lock(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        body = LockBatchRequestBody.from_json(request.body)
        held = self.locks.lock(body.consumer_group or "", body.client_id or "", body.mq_set, conn)
        return request.response(ResponseCode.SUCCESS, body=LockBatchResponseBody(held).to_json())

    def unlock(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        body = UnlockBatchRequestBody.from_json(request.body)
        self.locks.unlock(body.consumer_group or "", body.client_id or "", body.mq_set)
        return request.response(ResponseCode.SUCCESS)
