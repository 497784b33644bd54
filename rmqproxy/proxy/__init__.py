"""Proxy mode: rmqproxy in front of an existing Apache RocketMQ cluster (``rmqproxy proxy``)."""
