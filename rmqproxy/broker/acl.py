"""Plain ACL: accounts of ``plain_acl.yml``, signed requests and per-resource permissions, as a
4.9 broker with ``aclEnable=true`` checks them (docs/operations.md, "ACL").

Rules come from ``<home>/conf/plain_acl.yml`` and every ``*.yml``/``*.yaml`` under
``<home>/conf/acl/`` (home: ``rocketmqHome``, else ``$ROCKETMQ_HOME``), and are read again, whole,
when a file appears, goes or changes (``AccessControl.reload``, polled every ``RELOAD_S``). A file
that does not load leaves the rules in force as they were.

A request passes when its peer's IP is on the global whitelist; otherwise it needs the
``AccessKey`` of an account, and passes at once when its IP is on that account's whitelist, else
its ``Signature`` must be the account's: HmacSHA1 keyed by the secret over the values of every
other ext field in key order, then the body, in Base64. Then an admin request code needs an
admin account, and the topics and groups the request names (``required``, one table) need the
account's permission on each. A denial is SYSTEM_ERROR with the reference's ``AclException``
text; it names the account, never a secret.

Beyond the reference: the name-server codes that change something (DELETE_TOPIC_IN_NAMESRV,
WIPE_WRITE_PERM_OF_BROKER, ADD_WRITE_PERM_OF_BROKER, PUT_KV_CONFIG, DELETE_KV_CONFIG,
UPDATE_NAMESRV_CONFIG) need an admin too, since one port serves
both roles here; the ones that only read (routes, cluster info, topic lists) are open, as a
reference name server is. A route request for a ``%RETRY%`` topic is not only a read here (it
creates the retry topic of a new consumer group, so that its retry queue is assigned at once): it
needs a signature and the group's SUB, as a heartbeat does.
"""

from __future__ import annotations

import base64
import dataclasses
import hmac
import ipaddress
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from twisted.logger import Logger

from codec.bodies import HeartbeatData
from codec.codes import RequestCode
from codec.command import RemotingCommand
from codec.errors import CodecError

__all__ = ["ADMIN_CODES", "AccessControl", "AclError", "Denied", "acl_files", "load_rules", "signature"]

log = Logger()

PERM_DENY, PERM_ANY, PERM_PUB, PERM_SUB = 1, 2, 4, 8
_PERMS = {"PUB": PERM_PUB, "SUB": PERM_SUB, "PUB|SUB": PERM_PUB | PERM_SUB, "SUB|PUB": PERM_PUB | PERM_SUB,
          "DENY": PERM_DENY}  # fmt: skip
RETRY = "%RETRY%"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
#: Seconds between looks at the ACL files (the reference's watcher waits 5 s).
RELOAD_S = 5.0
#: Clients up to 4.9.3 (version 399) did not sign ``_UNIQUE_KEY_QUERY``; later ones do (5.x rule).
_UNSIGNED_QUERY_FLAG_UP_TO = 399
_EXCEPTION = "org.apache.rocketmq.acl.common.AclException"

#: Admin codes rmqproxy does not serve (answered 3), by the reference's numbers: an account still
#: needs admin rights to be told so.
UPDATE_AND_CREATE_ACL_CONFIG, DELETE_ACL_CONFIG, GET_BROKER_CLUSTER_ACL_INFO = 50, 51, 52  # 4.9 and 5.x
UPDATE_AND_CREATE_STATIC_TOPIC = 513  # 5.x
#: Codes only an admin account may send: the reference's (4.9 and 5.x) and the name-server codes that
#: change something (topics, write perm, KV and name-server config). The clean commands (306, 316, 329) need only a signature, as in the reference.
ADMIN_CODES = frozenset({
    RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.UPDATE_BROKER_CONFIG, RequestCode.DELETE_TOPIC_IN_BROKER,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, RequestCode.DELETE_SUBSCRIPTIONGROUP,
    UPDATE_AND_CREATE_STATIC_TOPIC,
    UPDATE_AND_CREATE_ACL_CONFIG, DELETE_ACL_CONFIG, GET_BROKER_CLUSTER_ACL_INFO, RequestCode.DELETE_TOPIC_IN_NAMESRV,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER, RequestCode.ADD_WRITE_PERM_OF_BROKER,
    RequestCode.PUT_KV_CONFIG, RequestCode.DELETE_KV_CONFIG, RequestCode.UPDATE_NAMESRV_CONFIG,
})  # fmt: skip
#: Name-server codes that only read: open, as on a reference name server (which has no ACL).
OPEN_CODES = frozenset({
    RequestCode.GET_ROUTEINFO_BY_TOPIC, RequestCode.GET_BROKER_CLUSTER_INFO, RequestCode.GET_KV_CONFIG,
    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, RequestCode.GET_TOPICS_BY_CLUSTER,
    RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS, RequestCode.GET_KVLIST_BY_NAMESPACE, RequestCode.GET_NAMESRV_CONFIG,
})  # fmt: skip


class AclError(ValueError):
    """An ACL file that cannot be used (the rules in force stay)."""


@dataclasses.dataclass(frozen=True)
class Denied:
    """Why a request is refused: ``reason`` labels the rejection metric, ``message`` is the
    reference's text (the remark is it behind the reference's exception name)."""

    reason: str
    message: str

    @property
    def remark(self) -> str:
        return f"{_EXCEPTION}: {self.message}"


def parse_perm(text: Any) -> int:
    """A perm string: ``PUB``, ``SUB``, ``PUB|SUB`` or ``DENY``; anything else denies."""
    return _PERMS.get(str(text).strip(), PERM_DENY) if text is not None else PERM_DENY


def permits(needed: int, owned: int) -> bool:
    """Whether ``owned`` grants ``needed`` (DENY wins; ANY asks for PUB or SUB)."""
    if owned & PERM_DENY:
        return False
    if needed & PERM_ANY:
        return bool(owned & (PERM_PUB | PERM_SUB))
    return bool(needed & owned)


# --- remote addresses ----------------------------------------------------------------------

def address_matcher(pattern: Any) -> Callable[[str], bool]:
    """A whitelist pattern as the reference reads one: blank (never), ``*`` (always), a list
    ``a,b``, a last part ``{x,y}``, a range or ``*`` in one part of an IPv4 address
    (``192.168.1.1-100``, ``10.10.*.*``), or one address. No CIDR, as in the reference."""
    text = "" if pattern is None else str(pattern).strip()
    if not text:
        return lambda ip: False
    if text in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
        return lambda ip: True
    if text.endswith("}"):
        prefix, _, items = text[:-1].partition("{")
        if not prefix.endswith((".", ":")) or not items:
            raise AclError(f"bad address pattern {text!r}")
        return _exact(prefix + item.strip() for item in items.split(","))
    if "," in text:
        return _exact(text.split(","))
    if "*" in text or "-" in text:
        return _range(text)
    return _exact([text])


def _canonical(ip: str) -> str:
    try:
        return ipaddress.ip_address(ip.strip().strip("[]")).exploded.upper()
    except ValueError:
        raise AclError(f"{ip.strip()!r} is not an IP address") from None


def _exact(ips: Iterable[str]) -> Callable[[str], bool]:
    allowed = frozenset(_canonical(ip) for ip in ips)
    return lambda ip: _canonical_or_none(ip) in allowed


def _canonical_or_none(ip: str) -> str | None:
    try:
        return _canonical(ip)
    except AclError:
        return None


def _range(text: str) -> Callable[[str], bool]:
    parts = text.split(".")
    if len(parts) != 4:
        raise AclError(f"bad address range {text!r}: an IPv4 pattern has four parts")
    for at in range(1, 4):
        part = parts[at]
        if part == "*":
            low, high = 0, 255
        elif re.fullmatch(r"\d{1,3}-\d{1,3}", part):
            low, high = (int(x) for x in part.split("-"))
            if not 0 <= low <= high <= 255 or high == 0:
                raise AclError(f"bad address range {text!r}")
        else:
            continue
        prefix = parts[:at]
        if not all(p.isdigit() and int(p) <= 255 for p in prefix):
            raise AclError(f"bad address range {text!r}")

        def matches(ip: str, prefix: list[str] = prefix, at: int = at, low: int = low, high: int = high) -> bool:
            got = ip.split(".")
            if len(got) != 4 or got[:at] != prefix or not got[at].isdigit():
                return False
            return low <= int(got[at]) <= high

        return matches
    raise AclError(f"bad address range {text!r}: parts 2 to 4 have no range")


# --- rules ---------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Account:
    access_key: str
    secret_key: str
    white: Callable[[str], bool]
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    perms: Mapping[str, int]  # topics by name, groups as %RETRY%<group>

    def perm_of(self, resource: str) -> int:
        perm = self.perms.get(resource)
        if perm is not None:
            return perm
        return self.default_group_perm if resource.startswith(RETRY) else self.default_topic_perm


@dataclasses.dataclass(frozen=True)
class Rules:
    global_white: tuple[Callable[[str], bool], ...]
    accounts: Mapping[str, Account]


def acl_files(home: Path) -> list[Path]:
    """The ACL files of ``home``: ``conf/plain_acl.yml`` and ``conf/acl/**/*.yml|yaml``."""
    files = sorted(p for p in (home / "conf" / "acl").rglob("*") if p.suffix in (".yml", ".yaml") and p.is_file())
    default = home / "conf" / "plain_acl.yml"
    return [*files, default] if default.is_file() and default not in files else files


def load_rules(files: Iterable[Path]) -> Rules:
    """The rules of these files (an accessKey in two files: the first one's). AclError if one
    does not parse or holds an account or pattern the reference would refuse."""
    white: list[Callable[[str], bool]] = []
    accounts: dict[str, Account] = {}
    for path in files:
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError, UnicodeDecodeError) as exc:
            raise AclError(f"{path}: {exc}") from None
        if not isinstance(data, dict):
            raise AclError(f"{path}: not a mapping of keys")
        try:
            white += [address_matcher(p) for p in data.get("globalWhiteRemoteAddresses") or ()]
            for entry in data.get("accounts") or ():
                account = _account(entry)
                accounts.setdefault(account.access_key, account)
        except AclError as exc:
            raise AclError(f"{path}: {exc}") from None
    return Rules(tuple(white), accounts)


def _account(entry: Any) -> Account:
    if not isinstance(entry, dict):
        raise AclError("an account is not a mapping of keys")
    # YAML reads secretKey: 12345678 as a number; the reference takes it as its text
    access, secret = (None if entry.get(k) is None else str(entry[k]) for k in ("accessKey", "secretKey"))
    if access is None or secret is None or len(access) <= 6 or len(secret) <= 6:
        raise AclError(f"the accessKey={access} and its secretKey cannot be null and must be longer than 6")
    perms: dict[str, int] = {}
    for key, prefix in (("topicPerms", ""), ("groupPerms", RETRY)):
        for item in entry.get(key) or ():
            name, sep, perm = str(item).partition("=")
            if not sep or "=" in perm or not name.strip():
                raise AclError(f"Parse resource permission failed for {key[:5]}:{item}")
            perms[prefix + name.strip()] = parse_perm(perm)
    admin = entry.get("admin", False)
    return Account(
        access, secret, address_matcher(entry.get("whiteRemoteAddress")), admin is True or str(admin).lower() == "true",
        parse_perm(entry.get("defaultTopicPerm")), parse_perm(entry.get("defaultGroupPerm")), perms,
    )  # fmt: skip


# --- requests ------------------------------------------------------------------------------

def signature(secret: str, ext: Mapping[str, str], body: bytes, version: int) -> str:
    """The ``Signature`` of a request: HmacSHA1 (keyed by ``secret``) of its ext field values in
    key order (Java's String order), ``Signature`` left out, then its body; Base64."""
    skipped = ("Signature", "_UNIQUE_KEY_QUERY") if version <= _UNSIGNED_QUERY_FLAG_UP_TO else ("Signature",)
    keys = sorted(ext)  # code point order: Java's (UTF-16 unit) order for the usual ASCII keys
    if not "".join(keys).isascii():
        keys.sort(key=lambda k: k.encode("utf-16-be"))
    content = "".join([str(ext[k]) for k in keys if k not in skipped]).encode("utf-8") + (body or b"")
    return base64.b64encode(hmac.digest(secret.encode("utf-8"), content, "sha1")).decode()


def _send(topic_key: str, group_key: str) -> Callable[[Mapping[str, str], bytes], list[tuple[str, int]]]:
    def needs(ext: Mapping[str, str], body: bytes) -> list[tuple[str, int]]:
        topic = ext.get(topic_key)
        if topic is not None and topic.startswith(RETRY):
            return [(RETRY + ext.get(group_key, ""), PERM_SUB)]
        return [(topic, PERM_PUB)] if topic is not None else []

    return needs


def _group(key: str, *, topic: bool = False) -> Callable[[Mapping[str, str], bytes], list[tuple[str, int]]]:
    def needs(ext: Mapping[str, str], body: bytes) -> list[tuple[str, int]]:
        group = ext.get(key)
        found = [(RETRY + group, PERM_SUB)] if group is not None else []
        if topic and ext.get("topic") is not None:
            found.append((ext["topic"], PERM_SUB))
        return found

    return needs


def _heartbeat(ext: Mapping[str, str], body: bytes) -> list[tuple[str, int]]:
    found = []
    for consumer in HeartbeatData.from_json(body).consumer_data_set:
        if consumer.group_name is not None:
            found.append((RETRY + consumer.group_name, PERM_SUB))
        for sub in consumer.subscription_data_set:
            if sub.topic is not None:
                found.append((sub.topic, PERM_SUB))  # a subscribed %RETRY%g is checked as the group g
    return found


def _topic(ext: Mapping[str, str], body: bytes) -> list[tuple[str, int]]:
    return [(ext["topic"], PERM_SUB)] if ext.get("topic") is not None else []


def _retry_route(ext: Mapping[str, str], body: bytes = b"") -> list[tuple[str, int]]:
    """A route request for a retry topic (which creates it): the group's SUB."""
    topic = ext.get("topic") or ""
    return [(topic, PERM_SUB)] if topic.startswith(RETRY) else []


#: What each request code needs, by the names it carries (the reference's table; LITE_PULL_MESSAGE
#: as a pull and SEND_BATCH_MESSAGE as a send, as 5.x checks them). Other codes need a signature.
REQUIRED: dict[int, Callable[[Mapping[str, str], bytes], list[tuple[str, int]]]] = {
    RequestCode.SEND_MESSAGE: _send("topic", "producerGroup"),
    RequestCode.SEND_MESSAGE_V2: _send("b", "a"),
    RequestCode.SEND_BATCH_MESSAGE: _send("b", "a"),
    RequestCode.CONSUMER_SEND_MSG_BACK: _group("group"),
    RequestCode.PULL_MESSAGE: _group("consumerGroup", topic=True),
    RequestCode.LITE_PULL_MESSAGE: _group("consumerGroup", topic=True),
    RequestCode.QUERY_MESSAGE: _topic,
    RequestCode.HEART_BEAT: _heartbeat,
    RequestCode.UNREGISTER_CLIENT: _group("consumerGroup"),
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: _group("consumerGroup"),
    RequestCode.UPDATE_CONSUMER_OFFSET: _group("consumerGroup", topic=True),
    RequestCode.GET_ROUTEINFO_BY_TOPIC: _retry_route,  # only a retry topic's gets this far
}


def _lacking(account: Account, needed: list[tuple[str, int]]) -> Denied | None:
    """The first (resource, perm) of ``needed`` the account does not have, as a refusal (an admin
    account without perms of its own has them all)."""
    if account.admin and not account.perms:
        return None
    for resource, perm in needed:
        if not permits(perm, account.perm_of(resource)):
            kind, name = ("group", resource[len(RETRY):]) if resource.startswith(RETRY) else ("topic", resource)
            return Denied("acl_permission", f"No default permission for {kind}:{name}")
    return None


class AccessControl:
    """The ACL rules of one home directory, and the check of each request against them."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self._seen = self._stamp()
        if not self._seen:
            raise AclError(f"aclEnable=true, but there is no ACL file: {home / 'conf' / 'plain_acl.yml'} "
                           f"or {home / 'conf' / 'acl'}/*.yml")  # fmt: skip
        self.rules = load_rules(path for path, _ in self._seen)
        self.reloads = 0

    def _stamp(self) -> tuple[tuple[Path, int], ...]:
        stamps = []
        for path in acl_files(self.home):
            try:
                stamps.append((path, path.stat().st_mtime_ns))
            except OSError:
                continue
        return tuple(stamps)

    def reload(self) -> bool:
        """Read the files again if one appeared, went or changed (the old rules stay if they
        do not load: AclError). True when new rules are in force."""
        stamp = self._stamp()
        if stamp == self._seen:
            return False
        self._seen = stamp
        self.rules = load_rules(path for path, _ in stamp)
        self.reloads += 1
        return True

    def poll(self) -> None:
        """``reload``, periodic: a file that does not load is logged, and the old rules stay."""
        try:
            if self.reload():
                log.info("ACL rules reloaded from {home}: {n} accounts", home=self.home, n=len(self.rules.accounts))
        except AclError as exc:
            log.error("ACL files changed but do not load, the rules in force stay: {error}", error=exc)

    def check_grpc(self, authorization: str | None, date_time: str | None, ip: str,
                   needed: list[tuple[str, int]]) -> Denied | None:  # fmt: skip
        """None if a gRPC call from ``ip`` with this ``authorization`` header (a 5.x client's
        ``MQv2-HMAC-SHA1 Credential=<key>, SignedHeaders=x-mq-date-time, Signature=<hex>``: the
        HMAC-SHA1 of the ``x-mq-date-time`` header with the account's secret) may use ``needed``
        (resource, perm) pairs, else why not. The same accounts and permissions as remoting
        requests; called on the gRPC thread, it only reads ``rules``, which a reload replaces whole."""
        rules = self.rules
        if any(white(ip) for white in rules.global_white):
            return None
        if not authorization:
            return Denied("acl_no_access_key", "No accessKey is configured")
        fields: dict[str, str] = {}
        _, _, rest = authorization.strip().partition(" ")
        for item in rest.split(","):
            key, _, value = item.strip().partition("=")
            fields[key] = value
        access_key = fields.get("Credential", "").split("/")[0]
        account = rules.accounts.get(access_key)
        if account is None:
            return Denied("acl_unknown_account", f"No acl config for {access_key}")
        if account.white(ip):
            return None
        expected = hmac.digest(account.secret_key.encode(), (date_time or "").encode(), "sha1").hex()
        if not date_time or not hmac.compare_digest(fields.get("Signature", "").lower().encode(), expected.encode()):
            return Denied("acl_signature", f"Check signature failed for accessKey={access_key}")
        return _lacking(account, needed)

    def check(self, request: RemotingCommand, ip: str) -> Denied | None:
        """None if ``request`` from ``ip`` may be served, else why not."""
        code = request.code
        ext = request.ext_fields or {}
        if code in OPEN_CODES and not (code == RequestCode.GET_ROUTEINFO_BY_TOPIC and _retry_route(ext)):
            return None
        rules = self.rules
        if any(white(ip) for white in rules.global_white):
            return None
        access_key = ext.get("AccessKey")
        if access_key is None:
            return Denied("acl_no_access_key", "No accessKey is configured")
        account = rules.accounts.get(access_key)
        if account is None:
            return Denied("acl_unknown_account", f"No acl config for {access_key}")
        if account.white(ip):
            return None
        given = ext.get("Signature")
        expected = signature(account.secret_key, ext, request.body, request.version)
        if given is None or not hmac.compare_digest(given.encode(), expected.encode()):
            return Denied("acl_signature", f"Check signature failed for accessKey={access_key}")
        try:
            needed = REQUIRED[code](ext, request.body) if code in REQUIRED else []
        except CodecError as exc:
            return Denied("acl_bad_request", str(exc))
        if (TRACE_TOPIC, PERM_PUB) in needed:
            return None
        if code in ADMIN_CODES and not account.admin:
            return Denied("acl_admin", f"Need admin permission for request code={code}, but accessKey={access_key} is not")
        return _lacking(account, needed)
