"""rmqproxy: a RocketMQ name server and broker in Python that shows where pull time goes."""

__version__ = "0.1.0"
