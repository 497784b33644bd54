"""rmqproxy/grpc_wire/messaging.proto is the apache.rocketmq.v2 wire protocol: the service's
methods and streaming kinds, the status codes, and the field numbers and types of the messages a
client sends first and reads most, as apache/rocketmq-apis v2.0.4 defines them (facts checked
here against the generated stubs, so an edit of the .proto that breaks the wire fails)."""

from __future__ import annotations

import pytest
from google.protobuf.descriptor import FieldDescriptor as F

from rmqproxy.grpc_wire import SERVICE, pb, rpc

UNARY, SERVER_STREAM, BIDI = (False, False), (False, True), (True, True)
METHODS = {
    "QueryRoute": UNARY, "QueryAssignment": UNARY, "Heartbeat": UNARY, "NotifyClientTermination": UNARY,
    "Telemetry": BIDI, "SendMessage": UNARY, "EndTransaction": UNARY, "RecallMessage": UNARY,
    "ReceiveMessage": SERVER_STREAM, "AckMessage": UNARY, "ChangeInvisibleDuration": UNARY,
    "ForwardMessageToDeadLetterQueue": UNARY, "PullMessage": SERVER_STREAM, "UpdateOffset": UNARY,
    "GetOffset": UNARY, "QueryOffset": UNARY,
}  # fmt: skip

CODES = {
    "OK": 20000, "MULTIPLE_RESULTS": 30000, "BAD_REQUEST": 40000, "ILLEGAL_ACCESS_POINT": 40001,
    "ILLEGAL_TOPIC": 40002, "ILLEGAL_CONSUMER_GROUP": 40003, "ILLEGAL_MESSAGE_TAG": 40004,
    "ILLEGAL_MESSAGE_GROUP": 40006, "ILLEGAL_FILTER_EXPRESSION": 40010, "ILLEGAL_INVISIBLE_TIME": 40011,
    "ILLEGAL_DELIVERY_TIME": 40012, "INVALID_RECEIPT_HANDLE": 40013, "MESSAGE_PROPERTY_CONFLICT_WITH_TYPE": 40014,
    "CLIENT_ID_REQUIRED": 40017, "ILLEGAL_POLLING_TIME": 40018, "UNAUTHORIZED": 40100, "FORBIDDEN": 40300,
    "NOT_FOUND": 40400, "TOPIC_NOT_FOUND": 40402, "CONSUMER_GROUP_NOT_FOUND": 40403, "REQUEST_TIMEOUT": 40800,
    "PAYLOAD_TOO_LARGE": 41300, "MESSAGE_BODY_TOO_LARGE": 41301, "TOO_MANY_REQUESTS": 42900,
    "INTERNAL_ERROR": 50000, "NOT_IMPLEMENTED": 50100, "UNSUPPORTED": 50500,
}  # fmt: skip

S, I32, I64, B, BYTES, MSG, ENUM = (F.TYPE_STRING, F.TYPE_INT32, F.TYPE_INT64, F.TYPE_BOOL, F.TYPE_BYTES,
                                    F.TYPE_MESSAGE, F.TYPE_ENUM)  # fmt: skip
#: message -> field -> (number, type, repeated)
FIELDS = {
    "Resource": {"resource_namespace": (1, S, False), "name": (2, S, False)},
    "Address": {"host": (1, S, False), "port": (2, I32, False)},
    "Endpoints": {"scheme": (1, ENUM, False), "addresses": (2, MSG, True)},
    "MessageQueue": {"topic": (1, MSG, False), "id": (2, I32, False), "permission": (3, ENUM, False),
                     "broker": (4, MSG, False), "accept_message_types": (5, ENUM, True)},
    "QueryRouteRequest": {"topic": (1, MSG, False), "endpoints": (2, MSG, False)},
    "Message": {"topic": (1, MSG, False), "user_properties": (2, MSG, True), "system_properties": (3, MSG, False),
                "body": (4, BYTES, False)},
    "SystemProperties": {"tag": (1, S, False), "keys": (2, S, True), "message_id": (3, S, False),
                         "message_type": (6, ENUM, False), "born_timestamp": (7, MSG, False),
                         "delivery_timestamp": (11, MSG, False), "receipt_handle": (12, S, False),
                         "queue_id": (13, I32, False), "queue_offset": (14, I64, False),
                         "invisible_duration": (15, MSG, False), "delivery_attempt": (16, I32, False),
                         "message_group": (17, S, False), "dead_letter_queue": (20, MSG, False)},
    "ReceiveMessageRequest": {"group": (1, MSG, False), "message_queue": (2, MSG, False),
                              "filter_expression": (3, MSG, False), "batch_size": (4, I32, False),
                              "invisible_duration": (5, MSG, False), "auto_renew": (6, B, False),
                              "long_polling_timeout": (7, MSG, False), "attempt_id": (8, S, False)},
    "AckMessageEntry": {"message_id": (1, S, False), "receipt_handle": (2, S, False)},
    "Settings": {"client_type": (1, ENUM, False), "access_point": (2, MSG, False),
                 "backoff_policy": (3, MSG, False), "request_timeout": (4, MSG, False),
                 "publishing": (5, MSG, False), "subscription": (6, MSG, False)},
}  # fmt: skip
#: oneofs the clients switch on: message -> oneof -> its fields
ONEOFS = {
    "ReceiveMessageResponse": {"content": {"status", "message", "delivery_timestamp"}},
    "Settings": {"pub_sub": {"publishing", "subscription"}},
}


def test_the_service_has_every_rpc_with_its_streaming_kind() -> None:
    service = pb.DESCRIPTOR.services_by_name["MessagingService"]
    assert service.full_name == SERVICE and pb.DESCRIPTOR.package == "apache.rocketmq.v2"
    kinds = {m.name: (m.client_streaming, m.server_streaming) for m in service.methods}
    assert kinds == METHODS
    assert hasattr(rpc, "MessagingServiceServicer") and hasattr(rpc, "add_MessagingServiceServicer_to_server")


def test_status_codes_have_their_numbers() -> None:
    assert {name: pb.Code.Value(name) for name in CODES} == CODES


@pytest.mark.parametrize("message", sorted(FIELDS))
def test_fields_have_their_numbers_and_types(message: str) -> None:
    fields = pb.DESCRIPTOR.message_types_by_name[message].fields_by_name
    got = {name: (fields[name].number, fields[name].type, fields[name].is_repeated)
           for name in FIELDS[message] if name in fields}  # fmt: skip
    assert got == FIELDS[message]


def test_oneofs_hold_the_fields_clients_switch_on() -> None:
    for message, oneofs in ONEOFS.items():
        by_name = pb.DESCRIPTOR.message_types_by_name[message].oneofs_by_name
        assert {name: {f.name for f in by_name[name].fields} for name in oneofs} == oneofs, message


def test_a_message_round_trips_through_its_wire_bytes() -> None:
    """Encoded by the generated code and read back field by field; the bytes start with field 1
    of Message (topic: tag 0x0a) as any protobuf implementation writes it."""
    message = pb.Message(topic=pb.Resource(name="TopicTest"), body=b"hello",
                         user_properties={"k": "v"},
                         system_properties=pb.SystemProperties(tag="TagA", keys=["a", "b"], message_id="01AB",
                                                               message_type=pb.FIFO, message_group="g1"))  # fmt: skip
    wire = message.SerializeToString()
    assert wire[:1] == b"\x0a"
    back = pb.Message.FromString(wire)
    assert back == message and back.system_properties.HasField("tag") and not back.system_properties.HasField(
        "delivery_attempt"
    )
