"""Hypothesis strategies for codec values (shared by the property tests)."""

from __future__ import annotations

import socket

from hypothesis import strategies as st

from codec.codes import LanguageCode, SerializeType
from codec.command import RemotingCommand
from codec.message import BatchItem, HostPort, Message

int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
# Property names and values: no separators, non-empty (what Java can round-trip).
prop_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02"), min_size=1, max_size=20
)
properties = st.dictionaries(prop_text, prop_text, max_size=6)

ipv4 = st.ip_addresses(v=4).map(str)
# Canonical text as inet_ntop writes it (e.g. "::ffff:0.0.0.0" for mapped addresses).
ipv6 = st.ip_addresses(v=6).map(lambda ip: socket.inet_ntop(socket.AF_INET6, ip.packed))
host = st.builds(HostPort, st.one_of(ipv4, ipv6), int32)


@st.composite
def commands(draw: st.DrawFn, serialize_type: int | None = None) -> RemotingCommand:
    stype = draw(st.sampled_from(list(SerializeType))) if serialize_type is None else serialize_type
    binary = stype == SerializeType.ROCKETMQ
    remark = draw(st.one_of(st.none(), text.filter(bool) if binary else text))
    ext = draw(st.one_of(st.none(), st.dictionaries(text, text, max_size=8)))
    if binary and ext == {}:
        ext = None  # the binary encoding cannot tell an empty map from none
    return RemotingCommand(
        code=draw(int16 if binary else int32),
        opaque=draw(int32),
        flag=draw(int32),
        remark=remark,
        ext_fields=ext,
        body=draw(st.binary(max_size=64)),
        language=draw(st.sampled_from(list(LanguageCode))),
        version=draw(int16 if binary else int32),
        serialize_type=stype,
    )


@st.composite
def messages(draw: st.DrawFn) -> Message:
    return Message(
        topic=draw(st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)),
        body=draw(st.binary(max_size=200)),
        properties=draw(properties),
        queue_id=draw(int32),
        flag=draw(int32),
        queue_offset=draw(int64),
        physical_offset=draw(int64),
        sys_flag=draw(int32) & ~0x30,
        born_timestamp=draw(int64),
        born_host=draw(host),
        store_timestamp=draw(int64),
        store_host=draw(host),
        reconsume_times=draw(int32),
        prepared_transaction_offset=draw(int64),
    )


batch_items = st.builds(BatchItem, st.binary(max_size=100), properties, int32)
