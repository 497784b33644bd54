"""Sans-IO codec for the Apache RocketMQ remoting protocol: bytes in, typed values out, and back.

No sockets, threads, clocks or Twisted: ``rmqproxy`` drives it. See docs/protocol.md.
"""
