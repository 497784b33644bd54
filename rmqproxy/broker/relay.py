"""Requests the broker makes of one named consumer on an admin's behalf, and their answers
turned into the admin's (the reference's ``callConsumer``): GET_CONSUMER_RUNNING_INFO and
CONSUME_MESSAGE_DIRECTLY. An offline client, one too old, a timeout and a failed call each get
the reference's code and remark."""

from __future__ import annotations

from twisted.internet import defer
from twisted.python.failure import Failure

from codec.codes import ResponseCode
from codec.command import RemotingCommand

from .clients import ClientRegistry
from ..net.outbound import RequestTimeout

CALL_CLIENT_TIMEOUT_S = 10.0  # Broker2Client.callClient waits 10 s
#: ``MQVersion`` ordinals: a client below V3_1_8_SNAPSHOT cannot answer a relayed call, and one
#: below V3_0_7_SNAPSHOT cannot take a pushed offset reset or a consumer-status request.
V3_1_8_SNAPSHOT = 62
V3_0_7_SNAPSHOT = 28


def call_consumer(
    clients: ClientRegistry,
    request: RemotingCommand,
    group: str,
    client_id: str | None,
    forward: RemotingCommand,
    timeout_s: float = CALL_CLIENT_TIMEOUT_S,
) -> RemotingCommand | defer.Deferred:
    """Send ``forward`` to ``client_id`` of consumer ``group``; answer ``request`` with the
    client's reply as it came, or with why there is none."""
    target = clients.find(group, client_id) if client_id else None
    info = clients.client_of(target) if target is not None else None
    if target is None or info is None or not getattr(target, "connected", False):
        return request.response(ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
    if info.version < V3_1_8_SNAPSHOT:
        return request.response(ResponseCode.SYSTEM_ERROR, f"The Consumer <{client_id}> Version <{info.version}> "
                                "too low to finish, please upgrade it to V3_1_8_SNAPSHOT")  # fmt: skip

    def relay(reply: RemotingCommand) -> RemotingCommand:
        return request.response(reply.code, reply.remark, reply.ext_fields, reply.body)

    def failed(failure: Failure) -> RemotingCommand:
        if failure.check(RequestTimeout):
            return request.response(
                ResponseCode.CONSUME_MSG_TIMEOUT, f"consumer <{group}> <{client_id}> Timeout: {failure.value}"
            )
        return request.response(
            ResponseCode.SYSTEM_ERROR, f"invoke consumer <{group}> <{client_id}> Exception: {failure.value}"
        )

    return target.request(forward, timeout_s).addCallbacks(relay, failed)
