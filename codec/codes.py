"""Request, response and language codes of the RocketMQ remoting protocol.

Values are facts from RocketMQ 4.9.8 ``RequestCode``/``ResponseCode``/``LanguageCode`` (5.3.x only
adds). Names keep Java's spelling so a grep finds both codebases. Peers may send numbers we do not
know: ``RemotingCommand.code`` stays a plain ``int`` and :func:`code_name` names what it can.
"""

from __future__ import annotations

import enum


class RequestCode(enum.IntEnum):
    """Request codes (client to server unless noted)."""

    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    GET_ALL_TOPIC_CONFIG = 21
    UPDATE_BROKER_CONFIG = 25
    GET_BROKER_CONFIG = 26
    GET_BROKER_RUNTIME_INFO = 28
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_EARLIEST_MSG_STORETIME = 32
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    END_TRANSACTION = 37
    GET_CONSUMER_LIST_BY_GROUP = 38
    CHECK_TRANSACTION_STATE = 39  # server to client, oneway
    NOTIFY_CONSUMER_IDS_CHANGED = 40  # server to client, oneway
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    CHECK_CLIENT_CONFIG = 46
    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    GET_TOPIC_STATS_INFO = 202
    GET_CONSUMER_CONNECTION_LIST = 203
    GET_PRODUCER_CONNECTION_LIST = 204
    RESET_CONSUMER_CLIENT_OFFSET = 220  # broker to client, oneway
    GET_CONSUMER_STATUS_FROM_CLIENT = 221  # broker to client
    INVOKE_BROKER_TO_RESET_OFFSET = 222
    INVOKE_BROKER_TO_GET_CONSUMER_STATUS = 223
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    WIPE_WRITE_PERM_OF_BROKER = 205
    DELETE_SUBSCRIPTIONGROUP = 207
    GET_CONSUME_STATS = 208
    DELETE_TOPIC_IN_BROKER = 215
    DELETE_TOPIC_IN_NAMESRV = 216
    GET_KVLIST_BY_NAMESPACE = 219
    GET_TOPICS_BY_CLUSTER = 224
    QUERY_TOPIC_CONSUME_BY_WHO = 300
    GET_SYSTEM_TOPIC_LIST_FROM_NS = 304
    GET_SYSTEM_TOPIC_LIST_FROM_BROKER = 305
    CLEAN_EXPIRED_CONSUMEQUEUE = 306
    GET_CONSUMER_RUNNING_INFO = 307
    CONSUME_MESSAGE_DIRECTLY = 309  # admin to broker, relayed broker to client
    SEND_MESSAGE_V2 = 310
    CLONE_GROUP_OFFSET = 314
    VIEW_BROKER_STATS_DATA = 315
    GET_BROKE_CONSUME_STATS = 317  # the reference's spelling
    CLEAN_UNUSED_TOPIC = 316
    UPDATE_NAMESRV_CONFIG = 318
    GET_NAMESRV_CONFIG = 319
    SEND_BATCH_MESSAGE = 320
    QUERY_CONSUME_QUEUE = 321
    SEND_REPLY_MESSAGE = 324
    SEND_REPLY_MESSAGE_V2 = 325
    PUSH_REPLY_MESSAGE_TO_CLIENT = 326  # broker -> requesting client
    ADD_WRITE_PERM_OF_BROKER = 327
    DELETE_EXPIRED_COMMITLOG = 329
    GET_TOPIC_CONFIG = 351  # 5.x (mqadmin topicStatus, consumerProgress)
    GET_SUBSCRIPTIONGROUP_CONFIG = 352  # 5.x
    LITE_PULL_MESSAGE = 361  # 5.x
    # 5.x server-side rebalance / POP; answered REQUEST_CODE_NOT_SUPPORTED.
    QUERY_ASSIGNMENT = 400
    SET_MESSAGE_REQUEST_MODE = 401
    POP_MESSAGE = 200050
    ACK_MESSAGE = 200051
    PEEK_MESSAGE = 200052
    CHANGE_MESSAGE_INVISIBLETIME = 200053
    NOTIFICATION = 200054
    POLLING_INFO = 200055
    BATCH_ACK_MESSAGE = 200151


class ResponseCode(enum.IntEnum):
    """Response codes (``ResponseCode`` plus ``RemotingSysResponseCode``)."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    TRANSACTION_FAILED = 4
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    VERSION_NOT_SUPPORTED = 15
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    FILTER_DATA_NOT_EXIST = 27
    FILTER_DATA_NOT_LATEST = 28
    INVALID_PARAMETER = 29  # 5.x
    TRANSACTION_SHOULD_COMMIT = 200
    TRANSACTION_SHOULD_ROLLBACK = 201
    TRANSACTION_STATE_UNKNOW = 202
    TRANSACTION_STATE_GROUP_WRONG = 203
    NO_BUYER_ID = 204
    NOT_IN_CURRENT_UNIT = 205
    CONSUMER_NOT_ONLINE = 206
    CONSUME_MSG_TIMEOUT = 207
    NO_MESSAGE = 208
    # 4.9 uses 209-211 for ACL failures; 5.x reuses them for POP polling.
    POLLING_FULL = 209
    POLLING_TIMEOUT = 210
    BROKER_NOT_EXIST = 211
    BROKER_DISPATCH_NOT_COMPLETE = 212
    BROADCAST_CONSUMPTION = 213
    FLOW_CONTROL = 215
    NOT_LEADER_FOR_QUEUE = 501
    ILLEGAL_OPERATION = 604
    GO_AWAY = 1500


class LanguageCode(enum.IntEnum):
    """Sender language; the ordinal is the byte in ROCKETMQ headers, the name is used in JSON."""

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12


class SerializeType(enum.IntEnum):
    """Header encoding: the high byte of a frame's second int32."""

    JSON = 0
    ROCKETMQ = 1


FLAG_RESPONSE = 0x1
FLAG_ONEWAY = 0x2


class PullSysFlag(enum.IntFlag):
    """The ``sysFlag`` bits of a PULL_MESSAGE request (Java's ``PullSysFlag``)."""

    COMMIT_OFFSET = 0x1
    SUSPEND = 0x2  # hold the pull until a message comes or ``suspendTimeoutMillis`` passes
    SUBSCRIPTION = 0x4  # the request carries its subscription (the broker must not use the registered one)
    CLASS_FILTER = 0x8
    LITE_PULL = 0x10

_REQUEST_NAMES = {c.value: c.name for c in RequestCode}
_RESPONSE_NAMES = {c.value: c.name for c in ResponseCode}


def request_code(value: int) -> RequestCode | int:
    """The RequestCode for ``value``, or ``value`` itself when unknown."""
    return RequestCode(value) if value in _REQUEST_NAMES else value


def response_code(value: int) -> ResponseCode | int:
    """The ResponseCode for ``value``, or ``value`` itself when unknown."""
    return ResponseCode(value) if value in _RESPONSE_NAMES else value


def code_name(value: int, *, response: bool) -> str:
    """Java's name for a code, or its decimal string when unknown (for logs and metrics labels)."""
    names = _RESPONSE_NAMES if response else _REQUEST_NAMES
    return names.get(value, str(value))
