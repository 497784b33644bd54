"""The one configuration object: broker.conf keys (Java properties syntax) and CLI overrides.

``SETTINGS`` is the single table that maps each broker.conf key (RocketMQ's camelCase, e.g.
``listenPort``) to a ``Config`` field (snake case) and a ``--kebab-case`` CLI flag. Precedence:
defaults, then the ``-c`` file, then flags. Unknown broker.conf keys are kept (``extra``) and
logged at start, since real broker.conf files carry many settings rmqproxy does not use; but a
key in ``UNKEPT_PROMISES``, set so that it promises protection rmqproxy does not give, stops
startup with a message naming it.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from codec.frame import DEFAULT_MAX_FRAME_BYTES

from .delay_levels import DEFAULT_LEVELS, parse_levels

#: ``flushDiskType``'s two values: fsync every 500 ms from a helper thread, or before each answer.
FLUSH_ASYNC = "ASYNC_FLUSH"
FLUSH_SYNC = "SYNC_FLUSH"


@dataclasses.dataclass(frozen=True)
class Setting:
    key: str  # broker.conf key
    field: str  # Config attribute
    type: type
    default: Any
    help: str
    serve: bool = True  # a key of ``rmqproxy serve``
    proxy: bool = False  # a key of ``rmqproxy proxy``
    runtime: bool = False  # UPDATE_BROKER_CONFIG may change it, live (rmqproxy/broker/config_updates.py)
    namesrv: bool = False  # a name-server key (GET_NAMESRV_CONFIG; UPDATE_NAMESRV_CONFIG when also runtime)
    low: int | None = None  # least value a number may take (checked at start and on update)

    @property
    def flag(self) -> str:
        return "--" + re.sub(r"(?<=[a-z0-9])([A-Z])", r"-\1", self.key).lower().replace(".", "-")


SETTINGS: tuple[Setting, ...] = (
    Setting("bindAddress", "bind_address", str, "127.0.0.1", "address to listen on", proxy=True, namesrv=True),
    Setting("listenPort", "listen_port", int, 9876, "remoting port serving name-server and broker codes", proxy=True, namesrv=True),
    Setting("brokerListenPort", "broker_listen_port", int, 0, "extra broker-only port (0: none)"),
    Setting("grpcServerPort", "grpc_server_port", int, 8081,
            "gRPC port for RocketMQ 5 clients (apache.rocketmq.v2.MessagingService; 0: off)"),
    Setting("maxInvisibleMessages", "max_invisible_messages", int, 100_000,
            "messages a gRPC consumer group may have received and not acked on one topic; past it receives get "
            "TOO_MANY_REQUESTS", runtime=True, low=1),
    Setting("fastPortEnable", "fast_port_enable", bool, True,
            "also listen on every broker port - 2: the fast (VIP) port of clients with vipChannelEnabled",
            proxy=True),
    Setting("brokerIP1", "broker_ip1", str, "", "address advertised in routes (default: bind address)", proxy=True),
    Setting("metricsPromExporterPort", "metrics_port", int, 5557, "Prometheus /metrics port (0: off)", proxy=True),
    Setting("metricsPromExporterHost", "metrics_host", str, "", "address /metrics listens on (default: bind address)", proxy=True),
    Setting("metricsExporterType", "metrics_exporter", str, "PROM", "PROM, or DISABLE to measure nothing at all", proxy=True),
    Setting("storePathRootDir", "store_path", str, "./rmqproxy-data", "store directory"),
    Setting("flushDiskType", "flush_disk_type", str, FLUSH_ASYNC, "ASYNC_FLUSH or SYNC_FLUSH"),
    Setting("brokerClusterName", "cluster_name", str, "DefaultCluster", "cluster name in routes", proxy=True),
    Setting("brokerName", "broker_name", str, "rmqproxy-a", "broker name in routes"),
    Setting("autoCreateTopicEnable", "auto_create_topic", bool, True, "create topics on first send", runtime=True),
    Setting("autoCreateSubscriptionGroup", "auto_create_group", bool, True,
            "create an unknown consumer group with the defaults on its first heartbeat, pull or send-back",
            runtime=True),
    Setting("maxSubscriptionGroups", "max_subscription_groups", int, 100_000,
            "most subscription groups the broker keeps; beyond it new groups are refused"),
    Setting("defaultTopicQueueNums", "default_topic_queue_nums", int, 8, "queues of TBW102 (auto-create cap)", runtime=True, low=1),
    Setting("maxTopicQueueNums", "max_topic_queue_nums", int, 1024, "most queues updateTopic may give a topic", runtime=True, low=1),
    Setting("longPollingEnable", "long_polling", bool, True, "hold empty pulls for their suspend timeout", runtime=True),
    Setting("shortPollingTimeMills", "short_polling_ms", int, 1000, "hold time when long polling is off", runtime=True, low=0),
    Setting("maxHeldPulls", "max_held_pulls", int, 100_000,
            "at this many held pulls, hold one more only from a connection below its fair share (the one holding the "
            "most answers SYSTEM_BUSY for it), else answer at once", proxy=True, runtime=True, low=0),
    Setting("maxHeldPullsPerConnection", "max_held_pulls_per_connection", int, 10_000,
            "beyond this many held pulls on one connection, answer SYSTEM_BUSY", proxy=True, runtime=True, low=0),
    Setting("maxInFlightRequestsPerConnection", "max_in_flight_requests_per_connection", int, 20_000,
            "beyond this many unanswered requests on one connection, answer SYSTEM_BUSY", proxy=True, runtime=True, low=1),
    Setting("maxPullSuspendTimeMillis", "max_pull_suspend_ms", int, 30_000,
            "longest hold a pull may ask for (suspendTimeoutMillis is cut to it)", proxy=True, runtime=True, low=0),
    Setting("maxBufferedReplyBytesPerConnection", "max_buffered_reply_bytes_per_connection", int, 16 << 20,
            "unread answer bytes one connection may hold; past it an answer with a body gets SYSTEM_BUSY", proxy=True,
            runtime=True, low=1),
    Setting("maxBufferedReplyBytes", "max_buffered_reply_bytes", int, 512 << 20,
            "unread answer bytes all connections together may hold; past it the same", proxy=True, runtime=True, low=1),
    Setting("serverSocketBacklog", "server_socket_backlog", int, 1024, "listen backlog of the remoting ports", proxy=True, namesrv=True),
    Setting("lockReleaseOnDisconnect", "lock_release_on_disconnect", str, "safe", "safe or immediate", proxy=True, runtime=True),
    Setting("rebalanceLockMaxLiveTime", "lock_max_live_ms", int, 60_000, "queue lock expiry without renewal", runtime=True, low=0),
    Setting("maxFrameSize", "max_frame_size", int, DEFAULT_MAX_FRAME_BYTES, "largest frame, length included", proxy=True),
    Setting("maxUnfinishedFrameBytes", "max_unfinished_frame_bytes", int, 256 << 20,
            "bytes of frames begun and not finished all connections together may hold (at least maxFrameSize); past "
            "it the connection with the largest is closed", proxy=True, runtime=True, low=1),
    Setting("frameStallTimeoutMillis", "frame_stall_timeout_ms", int, 30_000,
            "close a connection whose unfinished frame gets no byte for this long (0: never)", proxy=True,
            runtime=True, low=0),
    Setting("maxMessageSize", "max_message_size", int, 4 * 1024 * 1024, "largest message body", runtime=True, low=1),
    Setting("messageDelayLevel", "message_delay_level", str, DEFAULT_LEVELS, "delay of levels 1..n"),
    Setting("fileReservedTime", "file_reserved_time_hours", float, 72.0, "hours commit-log segments are kept", runtime=True, low=0),
    Setting("diskMaxUsedSpaceRatio", "disk_max_used_space_ratio", int, 75,
            "disk use (%) above which expired segments are deleted at once, not on the 10-minute tick", runtime=True, low=0),
    Setting("mappedFileSizeCommitLog", "commit_log_segment_size", int, 1 << 30, "commit-log segment bytes"),
    Setting("maxMappedConsumeQueueFiles", "max_mapped_consume_queue_files", int, 0,
            "consume-queue files mapped at once (2 fds each); idle ones reopen on use (0: a quarter of the fd limit)"),
    Setting("accessMessageInMemoryMaxRatio", "access_message_in_memory_max_ratio", int, 40,
            "percent of RAM whose newest messages count as cached (transfer limits, new-group offsets)"),
    Setting("pullLogPath", "pull_log_path", str, "", "pull/hold event log dir (default: <store>/logs)", proxy=True),
    Setting("pullLogMode", "pull_log_mode", str, "all", "all, held or off", proxy=True),
    Setting("pullLogRetentionHours", "pull_log_retention_hours", int, 72,
            "hours the pull event log keeps its files", proxy=True, low=1),
    Setting("pullLogMaxBytes", "pull_log_max_bytes", int, 0,
            "bytes the pull event log may take; its oldest files go first (0: 10 GiB or a tenth of its disk, the smaller)",
            proxy=True, low=0),
    Setting("pullLogCompact", "pull_log_compact", bool, True,
            "rewrite the pull event log's closed files as Parquet in the background (rmqproxy compact)", proxy=True),
    Setting("maxStatsKeys", "max_stats_keys", int, 10_000,
            "topics and topic@group pairs the broker statistics keep apart (past it: broker totals only)"),
    Setting("clientStatsIntervalSeconds", "client_stats_interval_s", int, 60, "consumer running-info poll",
            runtime=True, low=1),
    Setting("channelExpiredTimeout", "channel_expired_ms", int, 120_000, "close clients silent this long", runtime=True, low=0),
    Setting("enablePropertyFilter", "enable_property_filter", bool, True,
            "serve SQL92 subscriptions (MessageSelector.bySql); false refuses them at the consumer's start", runtime=True),
    Setting("timerWheelEnable", "timer_wheel_enable", bool, True,
            "serve 5.x timer messages (setDeliverTimeMs, setDelayTimeSec, setDelayTimeMs); false refuses them", runtime=True),
    Setting("timerMaxDelaySec", "timer_max_delay_sec", int, 259_200, "longest delay a timer message may ask for", runtime=True, low=0),
    Setting("storeReplyMessageEnable", "store_reply_message", bool, True,
            "also store replies to requests in <cluster>_REPLY_TOPIC (they are pushed to the requester either way)", runtime=True),
    Setting("brokerPermission", "broker_permission", int, 6,
            "READ 4 | WRITE 2: without WRITE sends are refused and routes show no write queues; "
            "wipeWritePerm/addWritePerm also change it at runtime", runtime=True, low=0),
    Setting("rejectTransactionMessage", "reject_transaction_message", bool, False,
            "refuse transactional (half) messages with NO_PERMISSION", runtime=True),
    Setting("transactionTimeOut", "transaction_timeout_ms", int, 6000,
            "age after which an undecided half message is checked back with its producer", runtime=True, low=0),
    Setting("transactionCheckInterval", "transaction_check_interval_ms", int, 60_000,
            "how often undecided half messages are looked for", runtime=True, low=100),
    Setting("transactionCheckMax", "transaction_check_max", int, 15,
            "checks after which an undecided half message is discarded to TRANS_CHECK_MAX_TIME_TOPIC", runtime=True, low=1),
    Setting("aclEnable", "acl_enable", bool, False,
            "check every request against the plain_acl.yml accounts (signature, admin codes, topic and group perms)"),
    Setting("rocketmqHome", "rocketmq_home", str, "",
            "where conf/plain_acl.yml and conf/acl/*.yml are read (default: $ROCKETMQ_HOME)", namesrv=True),
    Setting("tls.server.mode", "tls_mode", str, "permissive",
            "disabled, permissive (TLS and plain TCP on one port) or enforcing (TLS only)", proxy=True),
    Setting("tls.test.mode.enable", "tls_test_mode", bool, True,
            "serve a self-signed certificate made at start, not the certPath/keyPath ones, and (proxy, upstream) "
            "present no certificate and check none (the reference's default)", proxy=True),
    Setting("tls.server.certPath", "tls_cert_path", str, "", "the server's certificate chain (PEM)", proxy=True),
    Setting("tls.server.keyPath", "tls_key_path", str, "", "the server's private key (PEM)", proxy=True),
    Setting("tls.server.keyPassword", "tls_key_password", str, "", "the password of an encrypted keyPath", proxy=True),
    Setting("tls.server.need.client.auth", "tls_need_client_auth", str, "none",
            "none, optional or require a client certificate", proxy=True),
    Setting("tls.server.trustCertPath", "tls_trust_cert_path", str, "", "CA certificates client certificates are checked with",
            proxy=True),
    Setting("tls.config.file", "tls_config_file", str, "/etc/rocketmq/tls.properties",
            "Java properties file whose tls.* keys override these, but tls.server.mode and tls.enable (read if it exists)",
            proxy=True),
    Setting("tls.enable", "tls_enable", bool, False,
            "TLS on every upstream connection, to name servers and brokers (the Java client's key)", serve=False, proxy=True),
    Setting("tls.client.certPath", "tls_client_cert_path", str, "",
            "certificate chain (PEM) presented upstream, with tls.test.mode.enable=false (blank: none)", serve=False, proxy=True),
    Setting("tls.client.keyPath", "tls_client_key_path", str, "", "the private key (PEM) of tls.client.certPath",
            serve=False, proxy=True),
    Setting("tls.client.keyPassword", "tls_client_key_password", str, "", "the password of an encrypted tls.client.keyPath",
            serve=False, proxy=True),
    Setting("tls.client.authServer", "tls_client_auth_server", bool, False,
            "check upstream certificate chains (not host names, as the Java client), with tls.test.mode.enable=false",
            serve=False, proxy=True),
    Setting("tls.client.trustCertPath", "tls_client_trust_cert_path", str, "",
            "CA certificates (PEM) upstream certificates are checked with (blank: the system's)", serve=False, proxy=True),
    Setting("orderMessageEnable", "order_message_enable", bool, False,
            "routes carry orderTopicConf from the ORDER_TOPIC_CONFIG KV namespace (name-server key)",
            runtime=True, namesrv=True),
    Setting("kvConfigMaxEntries", "kv_config_max_entries", int, 10_000,
            "most KV config entries (updateKvConfig, updateTopic -o) the name server keeps (name-server key)",
            runtime=True, namesrv=True, low=0),
    Setting("brokerConfigPath", "broker_config_path", str, "",
            "file runtime config changes are written to (default: the -c file, else <store>/config/broker.properties)"),
    Setting("namesrvAddr", "namesrv_addr", str, "", "upstream name servers, host:port[;host:port...]",
            serve=False, proxy=True),
    Setting("proxyBrokerPorts", "proxy_broker_ports", str, "",
            "FIRST-LAST: local ports standing for upstream brokers (default: the 100 after listenPort)",
            serve=False, proxy=True),
    Setting("proxyRequestTimeoutMillis", "proxy_request_timeout_ms", int, 10_000,
            "how long an upstream broker may take to answer before the client gets SYSTEM_ERROR",
            serve=False, proxy=True),
    Setting("workers", "workers", int, 0,
            "proxy worker processes sharing the ports, each with its own reactor (0: one per core)",
            serve=False, proxy=True, low=0),
    Setting("shutdownDrainTimeoutMillis", "shutdown_drain_timeout_ms", int, 10_000,
            "on SIGTERM, how long to wait for answers still in flight before closing client connections",
            proxy=True, low=0),
)


def _true(text: str) -> bool:
    return text.strip().lower() == "true"


#: broker.conf keys that, set this way, promise a protection rmqproxy does not give: startup
#: refuses them rather than run unprotected while the operator believes otherwise.
UNKEPT_PROMISES: tuple[tuple[str, Callable[[str], bool], str], ...] = (
    ("authenticationEnabled", _true, "5.x authentication (ACL 2.0) is not implemented; aclEnable (plain ACL) is"),
    ("authorizationEnabled", _true, "5.x authorization (ACL 2.0) is not implemented; aclEnable (plain ACL) is"),
    ("brokerRole", lambda text: text.strip().upper() in ("SYNC_MASTER", "SLAVE"),
     "replication is not implemented: rmqproxy is a master without slaves (ASYNC_MASTER)"),
    ("enableDLegerCommitLog", _true, "DLedger replication is not implemented"),
    ("enableControllerMode", _true, "controller-mode replication is not implemented"),
)

_BY_KEY = {s.key: s for s in SETTINGS}
_BY_FIELD = {s.field: s for s in SETTINGS}
_BOUNDED = tuple(s for s in SETTINGS if s.low is not None)


#: The fields of ``Config``, one per setting, typed and defaulted by ``SETTINGS`` alone.
_Fields = dataclasses.make_dataclass(
    "_Fields",
    [(s.field, s.type, dataclasses.field(default=s.default)) for s in SETTINGS]
    + [("extra", Mapping[str, str], dataclasses.field(default_factory=dict)),
       ("given", frozenset, dataclasses.field(default=frozenset()))],
    frozen=True,
)


@dataclasses.dataclass(frozen=True)
class Config(_Fields):
    """Every setting (a field named by ``SETTINGS``' ``field``, e.g. ``config.listen_port``), plus
    the broker.conf keys rmqproxy does not use (``extra``) and the keys the file or flags set
    (``given``, for a mode that must refuse a key it does not serve); checked when made."""

    def __post_init__(self) -> None:
        if self.flush_disk_type not in (FLUSH_ASYNC, FLUSH_SYNC):
            raise ValueError(f"flushDiskType must be ASYNC_FLUSH or SYNC_FLUSH, not {self.flush_disk_type!r}")
        if self.metrics_exporter not in ("PROM", "DISABLE"):
            raise ValueError(f"metricsExporterType must be PROM or DISABLE, not {self.metrics_exporter!r}")
        if self.pull_log_mode not in ("all", "held", "off"):
            raise ValueError(f"pullLogMode must be all, held or off, not {self.pull_log_mode!r}")
        if self.lock_release_on_disconnect not in ("safe", "immediate"):
            raise ValueError(
                f"lockReleaseOnDisconnect must be safe or immediate, not {self.lock_release_on_disconnect!r}"
            )
        parse_levels(self.message_delay_level)
        for name in ("access_message_in_memory_max_ratio", "disk_max_used_space_ratio"):
            if not 0 <= getattr(self, name) <= 100:
                raise ValueError(f"{_BY_FIELD[name].key} must be a percentage (0-100)")
        if self.max_stats_keys < 0:
            raise ValueError("maxStatsKeys must be 0 or more")
        if self.max_subscription_groups < 1:
            raise ValueError("maxSubscriptionGroups must be 1 or more")
        if self.max_mapped_consume_queue_files < 0:
            raise ValueError("maxMappedConsumeQueueFiles must be 0 (automatic) or more")
        if not 0 <= self.broker_permission <= 7:
            raise ValueError("brokerPermission must be 0 to 7 (READ 4 | WRITE 2 | INHERIT 1)")
        for name in ("listen_port", "broker_listen_port", "metrics_port", "grpc_server_port"):
            if not 0 <= getattr(self, name) <= 65535:
                raise ValueError(f"{_BY_FIELD[name].key} must be a port number")
        if self.fast_port_enable and self.broker_listen_port and self.broker_listen_port - 2 == self.listen_port:
            raise ValueError(f"the fast port (brokerListenPort {self.broker_listen_port} - 2) is listenPort: "
                             "choose another brokerListenPort, or set fastPortEnable=false")
        if self.max_unfinished_frame_bytes < self.max_frame_size:
            raise ValueError(f"maxUnfinishedFrameBytes ({self.max_unfinished_frame_bytes}) must be at least "
                             f"maxFrameSize ({self.max_frame_size}): a frame of that size would close its connection")
        for setting in _BOUNDED:
            if getattr(self, setting.field) < setting.low:
                raise ValueError(f"{setting.key} must be {setting.low} or more, not {getattr(self, setting.field)}")

    @property
    def metrics_enabled(self) -> bool:
        """metricsExporterType=PROM: measure, and serve /metrics when the port is set."""
        return self.metrics_exporter == "PROM"

    @property
    def advertised_address(self) -> str:
        """``ip:port`` that routes point clients at (the broker port if separate)."""
        host = self.broker_ip1 or self.bind_address
        return f"{host}:{self.broker_listen_port or self.listen_port}"

    @property
    def fast_port(self) -> int:
        """The broker's fast (VIP) port: its advertised port - 2, as a reference broker derives it
        (0: none). Clients derive it themselves, so routes never name it."""
        port = (self.broker_listen_port or self.listen_port) - 2
        return port if self.fast_port_enable and port > 0 else 0

    @property
    def advertised_host(self) -> str:
        return self.advertised_address.rsplit(":", 1)[0]

    @property
    def acl_home(self) -> Path:
        """Where the ACL files are read: ``rocketmqHome``, else ``$ROCKETMQ_HOME``."""
        return Path(self.rocketmq_home or os.environ.get("ROCKETMQ_HOME", "") or ".")

    @property
    def store_dir(self) -> Path:
        return Path(self.store_path)

    @property
    def config_file(self) -> Path:
        """Where runtime config changes are persisted (the reference's ``brokerConfigPath``)."""
        return Path(self.broker_config_path) if self.broker_config_path else self.store_dir / "config" / "broker.properties"

    @property
    def pull_log_dir(self) -> Path:
        return Path(self.pull_log_path) if self.pull_log_path else self.store_dir / "logs"


def convert(setting: Setting, text: str) -> Any:
    """A broker.conf string as the setting's type (Java's ``Boolean.parseBoolean`` for booleans)."""
    if setting.type is bool:
        return text.strip().lower() == "true"
    try:
        return setting.type(text.strip())
    except ValueError:
        raise ValueError(f"{setting.key}={text!r} is not a valid {setting.type.__name__}") from None


def java_text(value: Any) -> str:
    """A setting's value as a Java broker prints it (``MixAll.properties2String``): booleans
    ``true``/``false``, and whole numbers without a decimal point (``fileReservedTime=72``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def parse_properties(text: str) -> dict[str, str]:
    """Java ``Properties.load`` syntax: ``key=value``, ``key: value`` or ``key value``; ``#``/``!``
    comments; a trailing backslash continues the line; common escapes."""
    result: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            logical += line[:-1]
            continue
        logical += line
        m = re.match(r"((?:\\.|[^=:\s])*)\s*[=:\s]?\s*(.*)$", logical)
        logical = ""
        if not m or not m.group(1):
            continue
        key, value = (_unescape(g) for g in m.groups())
        result[key] = value
    return result


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    def one(m: re.Match) -> str:
        code = m.group(1)
        return chr(int(code[1:], 16)) if len(code) == 5 else _ESCAPES.get(code, code)

    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", one, text)


def load(conf_file: Path | None = None, overrides: Mapping[str, Any] | None = None) -> Config:
    """Defaults, then broker.conf ``conf_file``, then ``overrides`` (Config field names)."""
    values: dict[str, Any] = {}
    extra: dict[str, str] = {}
    if conf_file is not None:
        for key, text in parse_properties(Path(conf_file).read_text(encoding="utf-8")).items():
            setting = _BY_KEY.get(key)
            if setting is None:
                extra[key] = text
            else:
                values[setting.field] = convert(setting, text)
        values["broker_config_path"] = str(conf_file)  # the file changes go back to, whatever it says
    for key, promises, why in UNKEPT_PROMISES:
        if key in extra and promises(extra[key]):
            raise ValueError(f"broker.conf sets {key}={extra[key]}, but {why}; remove the key to run without it")
    for field, value in (overrides or {}).items():
        if value is not None:
            if field not in _BY_FIELD:
                raise KeyError(f"no setting {field!r}")
            values[field] = value
    given = frozenset(_BY_FIELD[field].key for field in values if field in _BY_FIELD)
    return Config(**values, extra=extra, given=given)
