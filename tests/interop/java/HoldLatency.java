// Hold-service proof with a real client (run as a single-file source program by
// tests/interop/test_hold_latency.py): a push consumer idles for IDLE_MS (its pulls are held and
// time out), then a producer sends COUNT messages INTERVAL_MS apart; each message's latency is
// the consumer's receive time minus the producer's send time, both from this JVM's clock.
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;

public class HoldLatency {
    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        int count = Integer.parseInt(args[2]);
        long intervalMs = Long.parseLong(args[3]);
        long idleMs = Long.parseLong(args[4]);
        ConcurrentHashMap<String, Long> receivedAt = new ConcurrentHashMap<>();
        CountDownLatch all = new CountDownLatch(count);

        DefaultMQProducer producer = new DefaultMQProducer(topic + "-pg");
        producer.setNamesrvAddr(namesrv);
        producer.start();
        producer.send(new Message(topic, "warmup", "warmup".getBytes())); // creates the topic

        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(topic + "-cg");
        consumer.setNamesrvAddr(namesrv);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            long now = System.currentTimeMillis();
            msgs.forEach(m -> {
                if (m.getKeys() != null && receivedAt.putIfAbsent(m.getKeys(), now) == null) {
                    all.countDown();
                }
            });
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        Thread.sleep(idleMs);

        List<Long> sentAt = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            long sent = System.currentTimeMillis();
            producer.send(new Message(topic, "TagA", "k" + i, ("m" + i).getBytes()));
            sentAt.add(sent);
            if (i + 1 < count) {
                Thread.sleep(intervalMs);
            }
        }
        boolean ok = all.await(30, TimeUnit.SECONDS);
        StringBuilder latencies = new StringBuilder();
        for (int i = 0; i < count; i++) {
            Long got = receivedAt.get("k" + i);
            latencies.append(i == 0 ? "" : ",").append(got == null ? "null" : String.valueOf(got - sentAt.get(i)));
        }
        System.out.println("RESULT {\"all\":" + ok + ",\"latency_ms\":[" + latencies + "]}");
        consumer.shutdown();
        producer.shutdown();
    }
}
