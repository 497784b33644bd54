"""Sans-IO codec for the Apache RocketMQ remoting protocol: bytes in, typed values out, and back.

No sockets, threads, clocks or Twisted: ``rmqproxy`` drives it. See docs/protocol.md. Importing it
binds the compiled hot path when it is built, else the pure-Python one (``codec.implementation``).
"""

from . import implementation  # binds the hot path's implementation

__all__ = ["implementation"]
