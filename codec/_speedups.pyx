# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""Compiled twins of the codec's per-message leaf functions (issue 40); ``codec.implementation``
binds them in place of the pure-Python originals, which stay the reference.

Each twin returns what its pure twin returns and raises the same exception with the same text and
``where``. Input off the fast path (a bytearray where bytes are usual, a non-int field, a value out
of range) goes to the pure twin itself, so its errors are the pure ones by construction. Indexing
is done on raw pointers only after the length it reads was checked, hence no bounds checks.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem, PyDict_SetItem, PyDict_Size
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.ref cimport PyObject
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.limits cimport LLONG_MAX, LLONG_MIN
from libc.string cimport memcmp, memcpy

from orjson import JSONDecodeError as _OrjsonError
from orjson import loads as _orjson_loads

import json as _json

from codec import command as _command
from codec import headers as _headers
from codec import message as _message
from codec.codes import LanguageCode
from codec.errors import CustomHeaderError, FrameError, HeaderError, MessageError
from codec.frame import DEFAULT_MAX_FRAME_BYTES, MIN_PAYLOAD_BYTES
from codec.javacompat import java_str

cdef object _KEY_CACHE = _command._KEY_CACHE
cdef object _LANGUAGE_BY_VALUE = _command._LANGUAGE_BY_VALUE
cdef object _LANGUAGE_BY_NAME = _command._LANGUAGE_BY_NAME
cdef object _JSON_LANGUAGE = _command._JSON_LANGUAGE
cdef object _json_ext_keys = _command._json_ext_keys
cdef object _encode_str = _command._encode_str
cdef object _Inexact = _command._Inexact
cdef object _OTHER = LanguageCode.OTHER
cdef object _PY_TYPES = _headers._PY_TYPES
cdef object _packed_ip = _message._packed_ip
cdef object _topic_field = _message._topic_field
cdef object _crc32 = _message.crc32
cdef object _RemotingCommand = _command.RemotingCommand
cdef object _object_new = object.__new__
cdef object _object_setattr = object.__setattr__

# The pure twins, for input off the fast path (taken before ``implementation`` rebinds anything).
cdef object _pure_command_decode = _command.RemotingCommand.__dict__["decode"].__func__
cdef object _pure_peek = _command.peek
cdef object _pure_peek_answer = _command.peek_answer
cdef object _pure_encode_header = _command.RemotingCommand.__dict__["encode_header"]
cdef object _pure_decode_binary = _command._decode_binary
cdef object _pure_encode_binary = _command._encode_binary
cdef object _pure_int32 = _command._int32
cdef object _pure_header_fields = _command._header_fields
cdef object _pure_encode_message = _message.encode_message
cdef object _pure_string_to_properties = _message.string_to_properties
cdef object _pure_properties_to_string = _message.properties_to_string
cdef Py_ssize_t _MAX_PROPERTIES_BYTES = _message.MAX_PROPERTIES_BYTES

cdef long long _MIN_PAYLOAD = MIN_PAYLOAD_BYTES
cdef int _SER_JSON = 0
cdef int _SER_ROCKETMQ = 1
cdef long long _INT32_MIN = -2147483648
cdef long long _INT32_MAX = 2147483647


cdef inline int _i32(const unsigned char* p) noexcept nogil:
    return <int>((<unsigned int>p[0] << 24) | (<unsigned int>p[1] << 16) | (<unsigned int>p[2] << 8) | p[3])


cdef inline short _i16(const unsigned char* p) noexcept nogil:
    return <short>((<unsigned short>p[0] << 8) | p[1])


cdef inline void _put32(unsigned char* p, long long v) noexcept nogil:
    cdef unsigned int u = <unsigned int>v
    p[0] = <unsigned char>(u >> 24)
    p[1] = <unsigned char>(u >> 16)
    p[2] = <unsigned char>(u >> 8)
    p[3] = <unsigned char>u


cdef inline void _put16(unsigned char* p, long long v) noexcept nogil:
    cdef unsigned int u = <unsigned int>v
    p[0] = <unsigned char>(u >> 8)
    p[1] = <unsigned char>u


cdef inline void _put64(unsigned char* p, long long v) noexcept nogil:
    cdef unsigned long long u = <unsigned long long>v
    cdef int i
    for i in range(8):
        p[i] = <unsigned char>(u >> (56 - 8 * i))


cdef inline bint _as_ll(object value, long long lo, long long hi, long long* out):
    """``value`` as a C integer when it is an int within [lo, hi]; False sends the caller to the
    pure twin (which raises whatever struct raises for it)."""
    cdef int overflow = 0
    cdef long long v
    if not isinstance(value, int):
        return False
    v = PyLong_AsLongLongAndOverflow(value, &overflow)
    if overflow != 0 or v < lo or v > hi:
        return False
    out[0] = v
    return True


# --- frames ----------------------------------------------------------------------------------


cdef class FrameDecoder:
    """Compiled twin of ``codec.frame.FrameDecoder``: the same splitting, cap and failed state."""

    cdef public object max_frame_bytes
    cdef public object buffered_bytes
    cdef bytearray _buf
    cdef Py_ssize_t _pos
    cdef object _failed

    def __init__(self, max_frame_bytes=DEFAULT_MAX_FRAME_BYTES):
        if max_frame_bytes < 4 + MIN_PAYLOAD_BYTES:
            raise ValueError("max_frame_bytes must allow at least an empty header")
        self.max_frame_bytes = max_frame_bytes
        self.buffered_bytes = 0
        self._buf = bytearray()
        self._pos = 0
        self._failed = None

    def feed(self, data) -> list:
        """Add ``data`` and return the payloads of all frames now complete, in order."""
        if self._failed is not None:
            raise self._failed
        cdef bytearray buf = self._buf
        buf += data
        cdef Py_ssize_t pos = self._pos
        cdef Py_ssize_t end = PyByteArray_GET_SIZE(buf)
        cdef list frames = []
        limit_obj = self.max_frame_bytes - 4
        cdef long long limit = limit_obj if limit_obj < 0x7FFFFFFF else 0x7FFFFFFF
        cdef const unsigned char* p = <const unsigned char*>PyByteArray_AS_STRING(buf)
        cdef long long length
        while end - pos >= 4:
            length = _i32(p + pos)
            if length < _MIN_PAYLOAD or length > limit:
                self._failed = FrameError(
                    f"frame length {length} outside [{MIN_PAYLOAD_BYTES}, {limit_obj}]",
                    where=f"stream offset of frame +{pos}",
                )
                del buf[:]
                self._pos = 0
                self.buffered_bytes = 0
                raise self._failed
            if end - pos - 4 < length:
                break
            frames.append(PyBytes_FromStringAndSize(<const char*>p + pos + 4, <Py_ssize_t>length))
            pos += 4 + length
        if pos == end:
            del buf[:]
            pos = 0
        elif pos > 65536 and pos * 2 > end:
            del buf[:pos]
            pos = 0
        self._pos = pos
        self.buffered_bytes = PyByteArray_GET_SIZE(buf) - pos
        return frames


# --- remoting headers ------------------------------------------------------------------------


cdef dict _header_fields_of(bytes payload, Py_ssize_t* header_end):
    """Twin of ``codec.command._split_header`` for a bytes payload: its checked header properties
    (with ``serialize_type`` and ``_raw``), and where the body begins, into ``header_end``."""
    cdef Py_ssize_t size = PyBytes_GET_SIZE(payload)
    if size < 4:
        raise HeaderError(f"frame payload of {size} bytes has no header length", where=0)
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(payload)
    cdef unsigned int word = <unsigned int>_i32(p)
    cdef int serialize_type = (word >> 24) & 0xFF
    cdef Py_ssize_t header_len = word & 0xFFFFFF
    if header_len > size - 4:
        raise HeaderError(f"header length {header_len} exceeds frame payload {size - 4}", where=4)
    header = PyBytes_FromStringAndSize(<const char*>p + 4, header_len)
    cdef dict fields
    if serialize_type == _SER_JSON:
        fields = decode_json(header)
    elif serialize_type == _SER_ROCKETMQ:
        fields = decode_binary(header)
    else:
        raise HeaderError(f"unknown serialize type {serialize_type}", where=4)
    fields["serialize_type"] = serialize_type
    fields["_raw"] = (header, fields["opaque"])
    header_end[0] = 4 + header_len
    return fields


def command_decode(cls, payload):
    """Twin of ``RemotingCommand.decode`` (bound as its classmethod)."""
    if type(payload) is not bytes:
        return _pure_command_decode(cls, payload)
    cdef Py_ssize_t header_end
    cdef dict fields = _header_fields_of(payload, &header_end)
    fields["body"] = PyBytes_FromStringAndSize(PyBytes_AS_STRING(payload) + header_end,
                                               PyBytes_GET_SIZE(payload) - header_end)
    command = _object_new(_RemotingCommand)
    _object_setattr(command, "__dict__", fields)
    return command


def command_peek(payload):
    """Twin of ``codec.command.peek``: (code, flag, opaque) of a payload whose header is valid."""
    if type(payload) is not bytes:
        return _pure_peek(payload)
    cdef Py_ssize_t header_end
    cdef dict fields = _header_fields_of(payload, &header_end)
    return (fields["code"], fields["flag"], fields["opaque"])


cdef inline bint _number_at(const unsigned char* p, Py_ssize_t start, Py_ssize_t end, const char* key,
                            Py_ssize_t key_len, long long* out) noexcept nogil:
    """The first ``"key":`` in p[start:end] followed by -?[0-9]{1,10} and ``,`` or ``}``: its value
    into ``out`` (as ``peek_answer``'s regular expression finds it)."""
    cdef Py_ssize_t i = start, j, digits
    cdef long long value
    cdef bint negative
    while i + key_len + 3 <= end:
        if p[i] == 34 and memcmp(p + i + 1, key, key_len) == 0 and p[i + 1 + key_len] == 34 and p[i + 2 + key_len] == 58:
            j = i + 3 + key_len
            negative = j < end and p[j] == 45
            if negative:
                j += 1
            digits = 0
            value = 0
            while j < end and digits < 11 and 48 <= p[j] <= 57:
                value = value * 10 + (p[j] - 48)
                digits += 1
                j += 1
            if 1 <= digits <= 10 and j < end and (p[j] == 44 or p[j] == 125):
                out[0] = -value if negative else value
                return True
        i += 1
    return False


def command_peek_answer(payload):
    """Twin of ``codec.command.peek_answer``: code, flag and opaque read where they stand."""
    if type(payload) is not bytes:
        return _pure_peek_answer(payload)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(payload)
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(payload)
    cdef unsigned int word
    cdef Py_ssize_t end
    cdef int serialize_type
    cdef long long code, flag, opaque
    if size >= 4:
        word = <unsigned int>_i32(p)
        end = 4 + (word & 0xFFFFFF)
        serialize_type = (word >> 24) & 0xFF
        if end <= size and serialize_type == _SER_JSON:
            if (_number_at(p, 4, end, b"code", 4, &code) and _INT32_MIN <= code <= _INT32_MAX
                    and _number_at(p, 4, end, b"flag", 4, &flag) and _INT32_MIN <= flag <= _INT32_MAX
                    and _number_at(p, 4, end, b"opaque", 6, &opaque) and _INT32_MIN <= opaque <= _INT32_MAX):
                return (code, flag, opaque)
        elif end <= size and serialize_type == _SER_ROCKETMQ and end - 4 >= 21:
            return (_i16(p + 4), _i32(p + 13), _i32(p + 9))
    return command_peek(payload)


def command_encode_header(self) -> bytes:
    """Twin of ``RemotingCommand.encode_header`` (bound as the method): prefix, type word and header."""
    cdef dict fields = self.__dict__
    cdef long long serialize_type = -1
    body = fields.get("body")
    if (fields.get("_raw") is not None or type(body) is not bytes
            or not _as_ll(fields.get("serialize_type"), _SER_JSON, _SER_ROCKETMQ, &serialize_type)):
        return _pure_encode_header(self)  # a relayed header to patch, or input off the fast path
    header = encode_json(self) if serialize_type == _SER_JSON else encode_binary(self)
    cdef Py_ssize_t header_len = PyBytes_GET_SIZE(header)
    cdef Py_ssize_t body_len = PyBytes_GET_SIZE(body)
    if header_len > 0xFFFFFF or 4 + header_len + body_len > _INT32_MAX:
        return _pure_encode_header(self)
    out = PyBytes_FromStringAndSize(NULL, 8 + header_len)
    cdef unsigned char* o = <unsigned char*>PyBytes_AS_STRING(out)
    _put32(o, 4 + header_len + body_len)
    _put32(o + 4, (serialize_type << 24) | header_len)
    memcpy(o + 8, PyBytes_AS_STRING(header), header_len)
    return out


def decode_binary(header) -> dict:
    """Twin of ``codec.command._decode_binary``."""
    if type(header) is not bytes:
        return _pure_decode_binary(header)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(header)
    if size < 21:
        raise HeaderError(f"binary header of {size} bytes is shorter than its 21 fixed bytes", where=8)
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(header)
    cdef int code = _i16(p)
    cdef int language = <signed char>p[2]
    cdef int version = _i16(p + 3)
    cdef int opaque = _i32(p + 5)
    cdef int flag = _i32(p + 9)
    cdef long long remark_len = _i32(p + 13)
    cdef Py_ssize_t pos = 17
    if remark_len < 0 or remark_len > size - pos - 4:
        raise HeaderError(f"binary remark length {remark_len} does not fit the header", where=8 + 13)
    remark = None
    if remark_len:
        try:
            remark = PyUnicode_DecodeUTF8(<const char*>p + pos, <Py_ssize_t>remark_len, NULL)
        except UnicodeDecodeError as exc:
            raise HeaderError(f"binary remark is not UTF-8: {exc.reason}", where=8 + pos) from None
    pos += <Py_ssize_t>remark_len
    cdef long long ext_len = _i32(p + pos)
    pos += 4
    if ext_len < 0 or ext_len != size - pos:
        raise HeaderError(f"binary extFields length {ext_len} but {size - pos} bytes remain", where=8 + pos - 4)
    cdef dict ext = {} if ext_len else None
    cdef dict keys = _KEY_CACHE
    cdef long long key_len, val_len
    cdef Py_ssize_t end
    cdef PyObject* cached
    while pos < size:
        if size - pos < 2:
            raise HeaderError("binary ext entry truncated", where=8 + pos)
        key_len = _i16(p + pos)
        end = pos + 2 + <Py_ssize_t>key_len
        if key_len < 0 or end + 4 > size:
            raise HeaderError(f"binary ext key length {key_len} does not fit", where=8 + pos)
        raw_key = PyBytes_FromStringAndSize(<const char*>p + pos + 2, <Py_ssize_t>key_len)
        cached = PyDict_GetItem(keys, raw_key)
        if cached is NULL:
            try:
                key = PyUnicode_DecodeUTF8(<const char*>p + pos + 2, <Py_ssize_t>key_len, NULL)
            except UnicodeDecodeError as exc:
                raise HeaderError(f"binary ext field is not UTF-8: {exc.reason}", where=8 + pos) from None
            if PyDict_Size(keys) < 4096:
                keys[raw_key] = key
        else:
            key = <object>cached
        val_len = _i32(p + end)
        pos = end + 4 + <Py_ssize_t>val_len
        if val_len < 0 or pos > size:
            raise HeaderError(f"binary ext value length {val_len} for {key!r} does not fit", where=8 + end)
        try:
            value = PyUnicode_DecodeUTF8(<const char*>p + end + 4, <Py_ssize_t>val_len, NULL)
        except UnicodeDecodeError as exc:
            raise HeaderError(f"binary ext field is not UTF-8: {exc.reason}", where=8 + pos) from None
        PyDict_SetItem(ext, key, value)
    return {
        "code": code,
        "language": _LANGUAGE_BY_VALUE.get(language, language),
        "version": version,
        "opaque": opaque,
        "flag": flag,
        "remark": remark,
        "ext_fields": ext,
    }


def encode_binary(cmd) -> bytes:
    """Twin of ``codec.command._encode_binary``."""
    cdef long long code = 0, language = 0, version = 0, opaque = 0, flag = 0
    if not (
        _as_ll(cmd.code, -32768, 32767, &code)
        and _as_ll(cmd.language, -128, 127, &language)
        and _as_ll(cmd.version, -32768, 32767, &version)
        and _as_ll(cmd.opaque, _INT32_MIN, _INT32_MAX, &opaque)
        and _as_ll(cmd.flag, _INT32_MIN, _INT32_MAX, &flag)
    ):
        return _pure_encode_binary(cmd)
    remark_obj = cmd.remark
    if remark_obj is not None and type(remark_obj) is not str:
        return _pure_encode_binary(cmd)
    remark = remark_obj.encode("utf-8", "surrogatepass") if remark_obj else b""
    ext_obj = cmd.ext_fields
    cdef list encoded = []
    cdef Py_ssize_t ext_size = 0
    cdef Py_ssize_t klen, vlen
    if ext_obj:
        if type(ext_obj) is not dict:
            return _pure_encode_binary(cmd)
        for key, value in (<dict>ext_obj).items():
            if type(key) is not str or type(value) is not str:
                return _pure_encode_binary(cmd)
            k = (<str>key).encode("utf-8", "surrogatepass")
            v = (<str>value).encode("utf-8", "surrogatepass")
            klen = PyBytes_GET_SIZE(k)
            vlen = PyBytes_GET_SIZE(v)
            if klen > 32767 or vlen > _INT32_MAX:
                return _pure_encode_binary(cmd)
            encoded.append(k)
            encoded.append(v)
            ext_size += 6 + klen + vlen
    cdef Py_ssize_t remark_size = PyBytes_GET_SIZE(remark)
    if remark_size > _INT32_MAX or ext_size > _INT32_MAX:
        return _pure_encode_binary(cmd)
    out = PyBytes_FromStringAndSize(NULL, 21 + remark_size + ext_size)
    cdef unsigned char* o = <unsigned char*>PyBytes_AS_STRING(out)
    _put16(o, code)
    o[2] = <unsigned char>language
    _put16(o + 3, version)
    _put32(o + 5, opaque)
    _put32(o + 9, flag)
    _put32(o + 13, remark_size)
    memcpy(o + 17, PyBytes_AS_STRING(remark), remark_size)
    cdef Py_ssize_t pos = 17 + remark_size
    _put32(o + pos, ext_size)
    pos += 4
    cdef Py_ssize_t i
    cdef bytes part
    for i in range(0, len(encoded), 2):
        part = encoded[i]
        klen = PyBytes_GET_SIZE(part)
        _put16(o + pos, klen)
        memcpy(o + pos + 2, PyBytes_AS_STRING(part), klen)
        pos += 2 + klen
        part = encoded[i + 1]
        vlen = PyBytes_GET_SIZE(part)
        _put32(o + pos, vlen)
        memcpy(o + pos + 4, PyBytes_AS_STRING(part), vlen)
        pos += 4 + vlen
    return out


def encode_json(cmd) -> bytes:
    """Twin of ``codec.command._encode_json``: fastjson's property order, ext keys in HashMap order."""
    ext = cmd.ext_fields
    cdef list items = []
    cdef tuple order
    if ext is not None:
        order = _json_ext_keys(tuple(ext))
        for k, key_text in order:
            items.append(key_text + _encode_str(ext[k]))
    language = _JSON_LANGUAGE.get(cmd.language) or str(cmd.language)
    remark = cmd.remark
    remark_text = None if remark is None else _encode_str(remark)
    cdef list parts = ['{"code":', format(cmd.code, "")]
    if ext is not None:
        parts.append(',"extFields":{')
        parts.append(",".join(items))
        parts.append("}")
    parts.append(',"flag":')
    parts.append(format(cmd.flag, ""))
    parts.append(',"language":')
    parts.append(language)
    parts.append(',"opaque":')
    parts.append(format(cmd.opaque, ""))
    if remark_text is not None:
        parts.append(',"remark":')
        parts.append(remark_text)
    parts.append(',"serializeTypeCurrentRPC":"JSON","version":')
    parts.append(format(cmd.version, ""))
    parts.append("}")
    return "".join(parts).encode("utf-8", "surrogatepass")


cdef inline object _int32_field(dict obj, str key):
    """``_int32(obj, key, 0)`` with its common case (an int in range) inline."""
    cdef PyObject* found = PyDict_GetItem(obj, key)
    cdef long long v = 0
    if found is NULL:
        return 0
    value = <object>found
    if type(value) is int and _as_ll(value, _INT32_MIN, _INT32_MAX, &v):
        return value
    return _pure_int32(obj, key, 0)


def header_fields(obj, *, exact) -> dict:
    """Twin of ``codec.command._header_fields``: a parsed JSON header's properties, checked."""
    if not isinstance(obj, dict):
        raise HeaderError(f"JSON header is a {type(obj).__name__}, not an object", where=8)
    if type(obj) is not dict:
        return _pure_header_fields(obj, exact=exact)
    cdef dict d = <dict>obj
    language = d.get("language", "JAVA")
    if isinstance(language, str):
        language = _LANGUAGE_BY_NAME.get(language, _OTHER)
    elif type(language) is not int or not 0 <= language <= 127:
        raise HeaderError(f"header property 'language' is invalid: {language!r:.60}")
    remark = d.get("remark")
    if remark is not None and not isinstance(remark, str):
        raise HeaderError(f"header property 'remark' is not a string: {remark!r:.60}")
    ext = d.get("extFields")
    if ext is not None:
        if not isinstance(ext, dict):
            raise HeaderError(f"extFields is a {type(ext).__name__}, not an object")
        for key, value in ext.items():
            if type(value) is not str:
                if value is None or isinstance(value, (dict, list)):
                    raise HeaderError(f"extFields value of {key!r} is not a scalar: {value!r:.60}")
                if type(value) is float and not exact:
                    raise _Inexact
                ext[key] = java_str(value)
    return {
        "code": _int32_field(d, "code"),
        "language": language,
        "version": _int32_field(d, "version"),
        "opaque": _int32_field(d, "opaque"),
        "flag": _int32_field(d, "flag"),
        "remark": remark,
        "ext_fields": ext,
    }


def decode_json(header) -> dict:
    """Twin of ``codec.command._decode_json``: orjson first, json.loads when it may differ."""
    try:
        return header_fields(_orjson_loads(header), exact=False)
    except (_OrjsonError, HeaderError, _Inexact):
        pass
    try:
        obj = _json.loads(header)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise HeaderError(f"JSON header does not parse: {exc}", where=8) from None
    return header_fields(obj, exact=True)


# --- typed headers ---------------------------------------------------------------------------


def header_decode(self, ext):
    """Twin of ``HeaderCodec.decode`` (bound as the method): typed header from extFields."""
    if not ext:
        ext = {}
    cdef bint is_dict = type(ext) is dict
    cdef dict values = (<dict?>self._defaults).copy()
    cdef PyObject* found
    cdef Py_ssize_t n, i
    cdef long long number
    cdef Py_UCS4 ch
    cdef bint digits
    for step in <tuple?>self._plan:
        wire, attr, parse, short, required, f = <tuple>step
        if is_dict:
            found = PyDict_GetItem(<dict>ext, wire)
            text = None if found is NULL else <object>found
        else:
            text = ext.get(wire)
        if text is None:
            if required:
                raise CustomHeaderError(f"the custom field <{wire}> is null", where=self.java_name)
            continue
        if parse is None:
            values[attr] = text
            continue
        if type(text) is str:
            n = len(<str>text)
            if n < <Py_ssize_t>short and n > 0:
                digits = True
                number = 0
                for i in range(n):
                    ch = (<str>text)[i]
                    if ch < u'0' or ch > u'9':
                        digits = False
                        break
                    number = number * 10 + (<long long>ch - 48)
                if digits:
                    values[attr] = number
                    continue
        elif len(text) < short and text.isdigit() and text.isascii():
            values[attr] = int(text)
            continue
        try:
            values[attr] = parse(text)
        except ValueError:
            raise CustomHeaderError(
                f"the custom field <{wire}> has {text!r:.40}, not a {_PY_TYPES[f.type].__name__}",
                where=self.java_name,
            ) from None
    header = _object_new(self.cls)
    _object_setattr(header, "__dict__", values)
    return header


# --- properties ------------------------------------------------------------------------------


def string_to_properties(text) -> dict:
    """Twin of ``codec.message.string_to_properties``: per ``\\x02``-separated pair, the name up to
    its first ``\\x01`` and the rest as value, both non-empty; others skipped, a later duplicate wins."""
    if type(text) is not str:
        return _pure_string_to_properties(text)
    cdef dict result = {}
    cdef str pair
    cdef Py_ssize_t at
    for pair in (<str>text).split("\x02"):
        at = pair.find("\x01")
        if 0 < at < len(pair) - 1:
            result[pair[:at]] = pair[at + 1:]
    return result


def properties_to_string(properties) -> str:
    """Twin of ``codec.message.properties_to_string``: ``k\\x01v`` pairs joined by ``\\x02``."""
    if type(properties) is not dict:
        return _pure_properties_to_string(properties)
    cdef list pairs = []
    for key, value in (<dict>properties).items():
        if type(key) is not str or type(value) is not str:
            return _pure_properties_to_string(properties)
        pairs.append(<str>key + "\x01" + <str>value)
    return "\x02".join(pairs)


cdef bytes _encode_properties_fast(properties):
    """``codec.message._encode_properties`` through the compiled ``properties_to_string``."""
    raw = properties_to_string(properties).encode("utf-8", "surrogatepass")
    if PyBytes_GET_SIZE(raw) > _MAX_PROPERTIES_BYTES:
        raise MessageError(f"properties of {len(raw)} bytes exceed {_MAX_PROPERTIES_BYTES}")
    return raw


# --- stored records --------------------------------------------------------------------------


def encode_message(msg) -> bytes:
    """Twin of ``codec.message.encode_message``: one stored record, CRC and sizes computed."""
    born_host = msg.born_host
    store_host = msg.store_host
    born_ip = _packed_ip(born_host.host)
    store_ip = _packed_ip(store_host.host)
    cdef long long sys_flag = 0
    if not _as_ll(msg.sys_flag, _INT32_MIN, _INT32_MAX, &sys_flag):
        return _pure_encode_message(msg)
    sys_flag &= ~(0x10 | 0x20)
    cdef Py_ssize_t born_len = len(born_ip)
    cdef Py_ssize_t store_len = len(store_ip)
    if born_len == 16:
        sys_flag |= 0x10
    if store_len == 16:
        sys_flag |= 0x20
    magic_obj = msg.magic
    topic_field = _topic_field(msg.topic, magic_obj)
    properties = msg.properties
    props = _encode_properties_fast(properties) if properties else b""
    body = msg.body
    if type(body) is not bytes or type(born_ip) is not bytes or type(store_ip) is not bytes:
        return _pure_encode_message(msg)
    crc_obj = msg.body_crc
    crc_obj = _crc32(body) & 0x7FFFFFFF if crc_obj is None else crc_obj
    cdef long long crc = 0, magic = 0, queue_id = 0, flag = 0, queue_offset = 0, physical_offset = 0
    cdef long long born_ts = 0, born_port = 0, store_ts = 0, store_port = 0, reconsume = 0, prepared = 0
    if not (
        _as_ll(crc_obj, _INT32_MIN, _INT32_MAX, &crc)
        and _as_ll(magic_obj, 0, 0xFFFFFFFF, &magic)
        and _as_ll(msg.queue_id, _INT32_MIN, _INT32_MAX, &queue_id)
        and _as_ll(msg.flag, _INT32_MIN, _INT32_MAX, &flag)
        and _as_ll(msg.queue_offset, LLONG_MIN, LLONG_MAX, &queue_offset)
        and _as_ll(msg.physical_offset, LLONG_MIN, LLONG_MAX, &physical_offset)
        and _as_ll(msg.born_timestamp, LLONG_MIN, LLONG_MAX, &born_ts)
        and _as_ll(born_host.port, _INT32_MIN, _INT32_MAX, &born_port)
        and _as_ll(msg.store_timestamp, LLONG_MIN, LLONG_MAX, &store_ts)
        and _as_ll(store_host.port, _INT32_MIN, _INT32_MAX, &store_port)
        and _as_ll(msg.reconsume_times, _INT32_MIN, _INT32_MAX, &reconsume)
        and _as_ll(msg.prepared_transaction_offset, LLONG_MIN, LLONG_MAX, &prepared)
    ):
        return _pure_encode_message(msg)
    cdef Py_ssize_t body_len = PyBytes_GET_SIZE(body)
    cdef Py_ssize_t topic_len = PyBytes_GET_SIZE(topic_field)
    cdef Py_ssize_t props_len = PyBytes_GET_SIZE(props)
    cdef Py_ssize_t fixed = 48 + born_len + 4 + 8 + store_len + 4 + 4 + 8 + 4
    cdef Py_ssize_t total = fixed + body_len + topic_len + 2 + props_len
    if total > _INT32_MAX or body_len > _INT32_MAX:
        return _pure_encode_message(msg)
    out = PyBytes_FromStringAndSize(NULL, total)
    cdef unsigned char* o = <unsigned char*>PyBytes_AS_STRING(out)
    _put32(o, total)
    _put32(o + 4, magic)
    _put32(o + 8, crc)
    _put32(o + 12, queue_id)
    _put32(o + 16, flag)
    _put64(o + 20, queue_offset)
    _put64(o + 28, physical_offset)
    _put32(o + 36, sys_flag)
    _put64(o + 40, born_ts)
    cdef Py_ssize_t pos = 48
    memcpy(o + pos, PyBytes_AS_STRING(born_ip), born_len)
    pos += born_len
    _put32(o + pos, born_port)
    _put64(o + pos + 4, store_ts)
    pos += 12
    memcpy(o + pos, PyBytes_AS_STRING(store_ip), store_len)
    pos += store_len
    _put32(o + pos, store_port)
    _put32(o + pos + 4, reconsume)
    _put64(o + pos + 8, prepared)
    _put32(o + pos + 16, body_len)
    pos += 20
    memcpy(o + pos, PyBytes_AS_STRING(body), body_len)
    pos += body_len
    memcpy(o + pos, PyBytes_AS_STRING(topic_field), topic_len)
    pos += topic_len
    _put16(o + pos, props_len)
    memcpy(o + pos + 2, PyBytes_AS_STRING(props), props_len)
    return out
