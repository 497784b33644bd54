"""Route and cluster-info bodies with every broker address swapped for the proxy's listener.

The upstream name server answers in the JSON dialect the client's request asked for (standard
JSON for 4.9.4+ clients or ``acceptStandardJsonOnly``, else fastjson's unquoted broker ids;
cluster info always in the latter). The body is rewritten as generic JSON, not through the typed
bodies, so fields this code does not know (5.x ``topicQueueMappingByBroker``, ``zoneName``...)
pass through unchanged, and it is written back in the dialect it came in.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from codec import jsonjava
from codec.errors import BodyError

#: (broker name, broker id, upstream address) -> the address clients should use instead.
Localize = Callable[[str, int, str], str]


def _parse(body: bytes) -> tuple[Any, bool]:
    """The body's JSON and whether it was standard JSON (else fastjson's dialect)."""
    try:
        return json.loads(body), True
    except (ValueError, UnicodeDecodeError):
        return jsonjava.loads(body), False


def _dump(value: Any, standard: bool) -> bytes:
    text = jsonjava.dumps(value, quote_keys=standard, ascii_only=standard)
    return text.encode("utf-8", "surrogatepass")


def _broker_id(key: Any) -> int:
    if isinstance(key, int):
        return key
    if isinstance(key, str) and key.lstrip("-").isdigit():
        return int(key)
    raise BodyError(f"broker id {key!r} is not a number")


def _localize_broker_data(data: Any, localize: Localize, moved: dict[str, str]) -> None:
    if not isinstance(data, dict):
        raise BodyError("brokerData is not an object")
    name = data.get("brokerName")
    addrs = data.get("brokerAddrs")
    if not isinstance(name, str) or not isinstance(addrs, dict):
        raise BodyError("brokerData has no brokerName or brokerAddrs")
    for key, upstream in list(addrs.items()):
        if not isinstance(upstream, str):
            raise BodyError(f"broker address {upstream!r} of {name} is not a string")
        local = localize(name, _broker_id(key), upstream)
        moved[upstream] = local
        addrs[key] = local


def rewrite_route(body: bytes, localize: Localize) -> bytes:
    """A GET_ROUTEINFO_BY_TOPIC answer's body pointing at local listeners."""
    route, standard = _parse(body)
    if not isinstance(route, dict):
        raise BodyError("route is not an object")
    moved: dict[str, str] = {}
    for data in route.get("brokerDatas") or []:
        _localize_broker_data(data, localize, moved)
    filters = route.get("filterServerTable")
    if isinstance(filters, dict):  # keyed by broker address
        route["filterServerTable"] = {moved.get(k, k): v for k, v in filters.items()}
    return _dump(route, standard)


def rewrite_cluster_info(body: bytes, localize: Localize) -> bytes:
    """A GET_BROKER_CLUSTER_INFO answer's body pointing at local listeners."""
    info, standard = _parse(body)
    if not isinstance(info, dict):
        raise BodyError("cluster info is not an object")
    moved: dict[str, str] = {}
    for data in (info.get("brokerAddrTable") or {}).values():
        _localize_broker_data(data, localize, moved)
    return _dump(info, standard)


def cluster_nodes(body: bytes) -> list[tuple[str, int, str]]:
    """(broker name, broker id, address) of every node a cluster-info body lists."""
    info, _ = _parse(body)
    nodes = []
    for data in (info.get("brokerAddrTable") or {}).values() if isinstance(info, dict) else ():
        if isinstance(data, dict) and isinstance(data.get("brokerAddrs"), dict):
            for key, addr in data["brokerAddrs"].items():
                nodes.append((data.get("brokerName"), _broker_id(key), addr))
    return nodes
