"""Every error the codec raises; nothing else escapes a codec entry point.

Each class carries the hint a server needs, in the manner of h11's ``error_status_hint``:
``close_connection`` (the byte stream can no longer be trusted, as Java's ``NettyDecoder`` closes
on undecodable frames) or ``response_code`` (the frame was sound; answer the request with it).
"""

from __future__ import annotations

from .codes import ResponseCode


class CodecError(Exception):
    """Base of all codec errors: what was wrong (``what``) and where (``where``, may be None)."""

    close_connection: bool = False
    response_code: int = ResponseCode.SYSTEM_ERROR

    def __init__(self, what: str, where: str | int | None = None) -> None:
        self.what = what
        self.where = where
        super().__init__(what if where is None else f"{what} (at {where})")


class FrameError(CodecError):
    """The length prefix or header length is impossible or over the cap: close the connection."""

    close_connection = True


class HeaderError(CodecError):
    """The remoting header (JSON or ROCKETMQ) cannot be decoded or encoded: close the connection."""

    close_connection = True


class CustomHeaderError(CodecError):
    """A typed custom header is missing a required field or has a value of the wrong form.

    The reference answers SYSTEM_ERROR with a remark and keeps the connection.
    """


class MessageError(CodecError):
    """A stored/wire message record, batch body, property string or message id is malformed."""


class BodyError(CodecError):
    """A JSON body is malformed or lacks what its type needs."""
