"""Every codec test runs on both codec implementations (tests/implementations.py)."""

from tests import implementations

codec_implementation = implementations.codec_implementation  # autouse: pytest finds it here
