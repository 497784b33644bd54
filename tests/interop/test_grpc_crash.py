"""``kill -9`` of ``rmqproxy serve`` during gRPC receive and ack traffic (a real gRPC client over
TCP, the real server process): after the restart no message whose ack was answered OK is
delivered again, and every message sent is delivered and acked in the end (those in flight at
the kill come back once their invisibility ends)."""

from __future__ import annotations

import threading
import time

import grpc

from rmqproxy.grpc_wire import pb, rpc

from .server import RunningServer
from .wire import WireClient

TOPIC, GROUP = "CrashT", "CrashG"
COUNT = 1500
INVISIBLE_S = 2
METADATA = [("x-mq-client-id", "crash-test@1"), ("x-mq-client-version", "5.0.8")]


def _receive(stub: rpc.MessagingServiceStub) -> list:
    request = pb.ReceiveMessageRequest(group=pb.Resource(name=GROUP), batch_size=8,
                                       message_queue=pb.MessageQueue(topic=pb.Resource(name=TOPIC)))  # fmt: skip
    request.filter_expression.type, request.filter_expression.expression = pb.TAG, "*"
    request.invisible_duration.FromSeconds(INVISIBLE_S)
    request.long_polling_timeout.FromMilliseconds(500)
    return [r.message for r in stub.ReceiveMessage(request, metadata=METADATA, timeout=5) if r.HasField("message")]


def _ack(stub: rpc.MessagingServiceStub, message) -> bool:
    entry = pb.AckMessageEntry(message_id=message.system_properties.message_id,
                               receipt_handle=message.system_properties.receipt_handle)  # fmt: skip
    answer = stub.AckMessage(pb.AckMessageRequest(group=pb.Resource(name=GROUP), topic=pb.Resource(name=TOPIC),
                                                  entries=[entry]), metadata=METADATA, timeout=5)  # fmt: skip
    return answer.status.code == pb.OK


def test_nothing_acked_comes_back_and_nothing_unacked_is_lost_after_kill_9() -> None:
    with RunningServer(grpc=True, message_delay_level=None) as server:
        with WireClient(server.broker_addr) as wire:
            from codec.codes import RequestCode as C

            wire.call(C.UPDATE_AND_CREATE_TOPIC, topic=TOPIC, default_topic="TBW102", read_queue_nums=4,
                      write_queue_nums=4, perm=6, topic_filter_type="SINGLE_TAG", topic_sys_flag=0, order=False)  # fmt: skip
        channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
        stub = rpc.MessagingServiceStub(channel)
        for start in range(0, COUNT, 10):
            batch = []
            for i in range(start, start + 10):
                m = pb.Message(topic=pb.Resource(name=TOPIC), body=f"m{i}".encode())
                m.system_properties.message_id, m.system_properties.message_type = f"01CRASH{i:08d}", pb.NORMAL
                batch.append(m)
            answer = stub.SendMessage(pb.SendMessageRequest(messages=batch), metadata=METADATA, timeout=5)
            assert answer.status.code == pb.OK, answer.status
        acked_ok: set[str] = set()
        killer = threading.Thread(target=server.kill)
        try:
            while True:  # consume until the kill, from another thread mid-traffic, cuts the connection
                for message in _receive(stub):
                    if _ack(stub, message):
                        acked_ok.add(message.system_properties.message_id)
                    if len(acked_ok) == COUNT // 3 and not killer.is_alive() and killer.ident is None:
                        killer.start()
        except grpc.RpcError:
            pass
        killer.join()
        before_kill = set(acked_ok)
        assert 0 < len(before_kill) < COUNT, f"{len(before_kill)} acked before the kill: move the kill"
        channel.close()
        server.start()
        channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
        stub = rpc.MessagingServiceStub(channel)
        redelivered: list[str] = []
        deadline = time.monotonic() + 30
        while len(acked_ok) < COUNT and time.monotonic() < deadline:
            for message in _receive(stub):
                mid = message.system_properties.message_id
                if mid in before_kill:
                    redelivered.append(mid)
                if _ack(stub, message):
                    acked_ok.add(mid)
        channel.close()
    print(f"\nkill -9 after {len(before_kill)} of {COUNT} acks; {COUNT - len(before_kill)} delivered after the restart")
    assert redelivered == [], f"{len(redelivered)} messages acked before the kill were delivered again"
    assert len(acked_ok) == COUNT, f"{COUNT - len(acked_ok)} messages never delivered after the restart"
