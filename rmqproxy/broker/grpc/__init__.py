"""``serve``'s gRPC front end (``apache.rocketmq.v2.MessagingService``, the RocketMQ 5 clients'
protocol): ``service`` answers the RPCs on the gRPC thread, ``broker`` acts on the store and the
tables on the reactor thread, ``convert`` maps messages between the two (docs/architecture.md)."""
