"""Drive the real Apache RocketMQ Java classes as a test oracle.

``tests/interop/oracle/`` is a small Maven project (``rmqproxy.oracle.Oracle``) compiled against the
RocketMQ artifacts from Maven Central, once per client line.  The Java process reads one JSON
request per line on stdin and writes one JSON answer per line on stdout; bytes travel as lowercase
hex.  Python code uses it as::

    with Oracle("4.9") as o:
        o.call("encode_command", code=105, opaque=7, version=409, header_class="GetRouteInfoRequestHeader",
               fields={"topic": "TopicTest"}, serialize="JSON")["frame_hex"]

Ops (every answer may instead be ``{"error": "<java class>: <message>"}``, raised as OracleError):

``ping`` -> ok, version ("V4_9_8"), version_ordinal, json_library (fastjson or fastjson2 JSON class)
``encode_command`` code, flag (bit0 response, bit1 oneway), opaque, version, language ("JAVA"; null
    allowed), remark, header_class (simple name or null), fields {javaField: str}, extra_ext {k: v}
    (addExtField after the header is filled), body_hex, serialize ("JSON"/"ROCKETMQ") -> frame_hex:
    exactly what NettyEncoder writes (fastEncodeHeader + body).  Requests use
    createRequestCommand(code, header); responses createResponseCommand(HeaderClass) + setCode.
    opaque/version default to Java's own defaults (request counter / 0) when omitted.
``decode_command`` frame_hex (length prefix included), header_class -> code, language, version,
    opaque, flag, remark, ext_fields, body_hex, serialize, header {field: str|None} (all instance
    fields incl. inherited) or header_error; trailing_bytes when the frame is followed by more.
``encode_message`` topic, queue_id, flag, queue_offset, commit_log_offset, sys_flag, born_timestamp,
    born_host [ip, port], store_timestamp, store_host, reconsume_times, prepared_transaction_offset,
    body_crc, store_size (0 = computed), body_hex, properties [[k, v], ...], properties_map
    ("hash" = the message's own HashMap, default; "linked" = keep the given order)
    -> hex of MessageDecoder.encode(msg, false)
``decode_messages`` hex, read_body (true), decompress (false), check_crc (false; 5.x only)
    -> messages [{topic, queue_id, flag, queue_offset, commit_log_offset, sys_flag, born_timestamp,
    born_host "ip:port", store_timestamp, store_host, reconsume_times, prepared_transaction_offset,
    body_crc, store_size, body_hex, properties, msg_id, offset_msg_id, tags, keys}], stopped_on_error
``encode_batch`` messages [{topic, flag, body_hex, properties, properties_map}] -> hex
    (MessageDecoder.encodeMessages); ``decode_batch`` hex -> messages [{flag, body_hex, properties}]
``properties_to_string`` properties [[k, v]...] (LinkedHashMap) -> text;
    ``string_to_properties`` text -> properties, order (the HashMap's iteration order)
``create_offset_msg_id`` ip, port, offset -> id; ``decode_msg_id`` id -> ip, port, offset
``tag_hash`` tag -> hash; ``build_subscription`` topic, sub_string, [expression_type]
    -> sub_string, tags_set, code_set (Java iteration order), expression_type, topic
``encode_body`` class, json (loaded with the line's RemotingSerializable.fromJson), [features:
    SerializerFeature names for fastjson, JSONWriter.Feature names for fastjson2] -> hex, text
``decode_body`` class, hex -> value: plain JSON; maps with non-string keys (MessageQueue, Long)
    become [{"key": k, "value": v}] sorted by canonical key text, sets become sorted lists, null
    bean properties are left out.

Build: ``mvn -B -q -Drocketmq.version=V compile dependency:build-classpath -Dmdep.includeScope=runtime
-Dmdep.outputFile=.../target/V/classpath.txt`` in ``tests/interop/oracle``; the result is reused
while the pom and Java sources are unchanged (a hash stamp in ``target/V/``).  The versions can be
overridden with the environment variables ``RMQ_ORACLE_VERSION_4_9`` and ``RMQ_ORACLE_VERSION_5``.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from . import maven

__all__ = [
    "ORACLE_LINES",
    "Oracle",
    "OracleBuildError",
    "OracleError",
    "OracleProcessError",
    "build_classpath",
    "missing_tools",
]

#: Client line -> RocketMQ artifact version on Maven Central.  5.5.0 is the newest 5.x served
#: (5.3.4, 5.3.5, 5.4.1, 5.5.1, 5.6.0 do not resolve); note 5.4.0+ serialize JSON with fastjson2.
ORACLE_LINES: dict[str, str] = {
    "4.9": os.environ.get("RMQ_ORACLE_VERSION_4_9", "4.9.8"),
    "5": os.environ.get("RMQ_ORACLE_VERSION_5", "5.5.0"),
}

ORACLE_DIR = Path(__file__).resolve().parent / "oracle"

OracleBuildError = maven.MavenBuildError
missing_tools = maven.missing_tools
MAIN_CLASS = "rmqproxy.oracle.Oracle"


class OracleError(Exception):
    """The Java side answered {"error": ...} (the message is "<java class>: <message>")."""


class OracleProcessError(RuntimeError):
    """The Java process died, closed its output or did not answer in time."""


def _version_of(line: str) -> str:
    return ORACLE_LINES.get(line, line)


def _target(version: str) -> Path:
    return ORACLE_DIR / "target" / version


def build_classpath(line: str) -> str:
    """Compile the oracle for a client line ("4.9", "5" or an explicit version) and return its classpath
    (``maven.build_classpath``: reused while pom.xml and the sources are unchanged)."""
    return maven.build_classpath(ORACLE_DIR, _version_of(line), marker="rmqproxy/oracle/Oracle.class")


class Oracle:
    """One long-running Java oracle process for one client line."""

    def __init__(self, line: str, *, classpath: str | None = None, timeout: float = 60.0) -> None:
        self.line = line
        self.version = _version_of(line)
        self.timeout = timeout
        target = _target(self.version)
        cp = classpath if classpath is not None else build_classpath(line)
        log_dir = target / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        self.stderr_path = target / "oracle-stderr.log"
        self._stderr = open(self.stderr_path, "ab")
        env = dict(os.environ)
        env.pop("ROCKETMQ_SERIALIZE_TYPE", None)  # read by RemotingCommand's static initializer
        self.command = [
            shutil.which("java") or "java",
            "-XX:TieredStopAtLevel=1",
            "-XX:+UseSerialGC",
            "-Xshare:auto",
            f"-Drocketmq.log.root={log_dir}",  # 5.x logback would otherwise write ~/logs/rocketmqlogs
            f"-Drocketmq.client.logRoot={log_dir}",
            "-Dfile.encoding=UTF-8",
            "-cp", cp,
            MAIN_CLASS,
        ]
        try:
            self._proc = subprocess.Popen(
                self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=env
            )
        except OSError:
            self._stderr.close()
            raise
        self._buf = b""

    # -- protocol -------------------------------------------------------------------------------

    def call(self, op: str, **args: Any) -> dict[str, Any]:
        """Send one request and return the answer; raise OracleError if it carries "error"."""
        answer = self.request({"op": op, **args})
        if "error" in answer:
            raise OracleError(answer["error"])
        return answer

    def request(self, req: dict[str, Any]) -> dict[str, Any]:
        """Send one raw request and return the raw answer (errors are not raised)."""
        if self._proc.poll() is not None:
            raise OracleProcessError(f"oracle process exited ({self._proc.returncode}); {self._stderr_tail()}")
        line = json.dumps(req, separators=(",", ":")) + "\n"
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(line.encode())
            self._proc.stdin.flush()
        except BrokenPipeError as e:
            raise OracleProcessError(f"oracle process died; {self._stderr_tail()}") from e
        return json.loads(self._readline())

    def _readline(self) -> bytes:
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + self.timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                raise OracleProcessError(f"oracle did not answer within {self.timeout}s; {self._stderr_tail()}")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise OracleProcessError(f"oracle closed stdout; {self._stderr_tail()}")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def _stderr_tail(self) -> str:
        try:
            self._stderr.flush()
            return "stderr tail:\n" + self.stderr_path.read_text(errors="replace")[-3000:]
        except OSError:
            return "no stderr"

    # -- lifecycle ------------------------------------------------------------------------------

    def close(self) -> None:
        proc = self._proc
        if proc.poll() is None:
            try:
                assert proc.stdin is not None
                proc.stdin.close()  # the Java loop ends at EOF
                proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None and not stream.closed:
                stream.close()
        if not self._stderr.closed:
            self._stderr.close()

    def __enter__(self) -> Oracle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Oracle(line={self.line!r}, version={self.version!r})"
