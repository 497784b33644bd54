package rmqproxy.grpcclient;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.java.message.MessageViewImpl;
import org.apache.rocketmq.client.java.route.MessageQueueImpl;

/** What a received message looks like in the RESULT (one JSON object per delivery). */
final class Views {
    private Views() {
    }

    /**
     * {message_id, topic, body (UTF-8), tag, keys, message_group, delivery_attempt, born_ms, received_ms,
     * delivery_timestamp (when the message has one), via_queue {broker, queue_id} and offset}.  The client's
     * MessageViewImpl takes its queue from the receive request, not from the message: a SimpleConsumer
     * receives through one queue of a broker and the reference proxy pops from all that broker's queues,
     * so via_queue is the queue asked, while offset is the message's own queue offset.
     */
    static Map<String, Object> describe(MessageView m, long receivedMs) {
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("message_id", m.getMessageId().toString());
        r.put("topic", m.getTopic());
        r.put("body", body(m));
        r.put("tag", m.getTag().orElse(null));
        r.put("keys", new ArrayList<>(m.getKeys()));
        r.put("message_group", m.getMessageGroup().orElse(null));
        r.put("delivery_attempt", m.getDeliveryAttempt());
        r.put("born_ms", m.getBornTimestamp());
        r.put("received_ms", receivedMs);
        m.getDeliveryTimestamp().ifPresent(t -> r.put("delivery_timestamp", t));
        if (m instanceof MessageViewImpl) {
            MessageViewImpl impl = (MessageViewImpl) m;
            MessageQueueImpl mq = impl.getMessageQueue();
            if (mq != null) {
                Map<String, Object> q = new LinkedHashMap<>();
                q.put("broker", mq.getBroker().getName());
                q.put("queue_id", mq.getQueueId());
                r.put("via_queue", q);
            }
            r.put("offset", impl.getOffset());
        }
        return r;
    }

    static String body(MessageView m) {
        ByteBuffer b = m.getBody().duplicate();
        byte[] bytes = new byte[b.remaining()];
        b.get(bytes);
        return new String(bytes, StandardCharsets.UTF_8);
    }
}
