"""Request processors, one module per concern: name server, send, pull, consumer, send-back,
admin. Each is a plain object whose methods are dispatch handlers ``(request, header, conn)``."""
