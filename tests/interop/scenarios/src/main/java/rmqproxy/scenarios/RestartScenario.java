package rmqproxy.scenarios;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Scenario 6, "restart": a producer thread sends sync messages continuously (one every
 * --interval-ms, default 5) while a push consumer (CONSUME_FROM_FIRST_OFFSET) consumes; the
 * server is restarted from outside meanwhile.  Prints "PROGRESS sent=N received=N failed=N" every
 * --progress-ms (250).  The producer stops at the first line on stdin (or EOF), or after
 * --max-sent messages were acknowledged; the consumer then waits up to --drain-ms (60000) for every
 * acknowledged (SEND_OK) key.  Failed sends are retried after 100 ms with the next key.
 *
 * <p>Result: sent_ok, send_not_ok (other SendStatus), send_failed (exceptions) with the first
 * failures, received / distinct / duplicates, missing (SEND_OK keys never received) with
 * missing_keys, received_unacknowledged (keys whose send threw but which arrived anyway).
 *
 * <p>--heartbeat-ms sets both clients' heartbeatBrokerInterval and --poll-namesrv-ms their
 * pollNameServerInterval (the client's 30 s each when not given); --rebalance-interval-ms the system
 * property rocketmq.client.rebalance.waitInterval (20 s when not given).
 */
final class RestartScenario {
    private RestartScenario() {
    }

    static Map<String, Object> run(Main.Args a) throws Exception {
        String topic = a.get("topic");
        String group = a.get("group");
        String prefix = a.get("key-prefix", topic);
        long interval = a.getLong("interval-ms", 5);
        long progressMs = a.getLong("progress-ms", 250);
        long drainMs = a.getLong("drain-ms", 60000);
        long maxSent = a.getLong("max-sent", Long.MAX_VALUE);
        String rebalanceMs = a.get("rebalance-interval-ms", null);
        if (rebalanceMs != null) {
            // RebalanceService reads this once, when the first client instance of this JVM is created.
            System.setProperty("rocketmq.client.rebalance.waitInterval", rebalanceMs);
        }

        Map<String, Boolean> acked = new ConcurrentHashMap<>();
        Map<String, AtomicInteger> seen = new ConcurrentHashMap<>();
        AtomicLong deliveries = new AtomicLong();
        AtomicInteger notOk = new AtomicInteger();
        AtomicInteger failed = new AtomicInteger();
        Map<String, Integer> notOkStatuses = new ConcurrentHashMap<>();
        List<String> failures = Collections.synchronizedList(new ArrayList<>());
        AtomicBoolean stop = new AtomicBoolean();
        AtomicInteger nextIndex = new AtomicInteger();

        DefaultMQProducer producer = new DefaultMQProducer(group + "-producer");
        producer.setNamesrvAddr(a.namesrv());
        Main.intervals(producer, a);
        producer.start();
        // the first send creates the topic, so the consumer finds its route when it starts
        String firstKey = prefix + "-" + nextIndex.getAndIncrement();
        SendResult first = Main.setupSend(producer, new Message(topic, "TagA", firstKey, firstKey.getBytes(StandardCharsets.UTF_8)));
        if (first.getSendStatus() == SendStatus.SEND_OK) {
            acked.put(firstKey, true);
        }

        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(a.namesrv());
        Main.intervals(consumer, a);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                deliveries.incrementAndGet();
                seen.computeIfAbsent(m.getKeys(), k -> new AtomicInteger()).incrementAndGet();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();

        Thread sender = new Thread(() -> {
            while (!stop.get() && acked.size() < maxSent) {
                String key = prefix + "-" + nextIndex.getAndIncrement();
                try {
                    SendResult r = producer.send(new Message(topic, "TagA", key, key.getBytes(StandardCharsets.UTF_8)));
                    if (r.getSendStatus() == SendStatus.SEND_OK) {
                        acked.put(key, true);
                    } else {
                        notOk.incrementAndGet();
                        notOkStatuses.merge(r.getSendStatus().name(), 1, Integer::sum);
                    }
                    if (interval > 0) {
                        Thread.sleep(interval);
                    }
                } catch (InterruptedException e) {
                    return;
                } catch (Exception e) {
                    failed.incrementAndGet();
                    if (failures.size() < 10) {
                        failures.add(key + ": " + Main.describe(e));
                    }
                    try {
                        Thread.sleep(100);
                    } catch (InterruptedException ie) {
                        return;
                    }
                }
            }
        }, "scenario-sender");
        sender.setDaemon(true);
        sender.start();

        Thread stdin = new Thread(() -> {
            Main.awaitStop();
            stop.set(true);
        }, "scenario-stdin");
        stdin.setDaemon(true);
        stdin.start();

        long t0 = System.currentTimeMillis();
        while (sender.isAlive()) {
            Main.progress("PROGRESS sent=" + acked.size() + " received=" + seen.size() + " failed=" + failed.get());
            sender.join(progressMs);
        }
        long stoppedAt = System.currentTimeMillis();
        Main.progress("# producer stopped after " + acked.size() + " acknowledged sends; draining");
        long deadline = stoppedAt + drainMs;
        long nextProgress = 0;
        while (System.currentTimeMillis() < deadline && !allSeen(acked, seen)) {
            if (System.currentTimeMillis() > nextProgress) {
                Main.progress("PROGRESS sent=" + acked.size() + " received=" + seen.size() + " failed=" + failed.get());
                nextProgress = System.currentTimeMillis() + progressMs;
            }
            Main.sleep(20);
        }
        long drained = System.currentTimeMillis() - stoppedAt;
        Main.sleep(500);
        consumer.shutdown();
        producer.shutdown();

        List<String> missing = new ArrayList<>();
        for (String k : acked.keySet()) {
            if (!seen.containsKey(k)) {
                missing.add(k);
            }
        }
        Collections.sort(missing);
        int dups = 0;
        int unacked = 0;
        for (Map.Entry<String, AtomicInteger> e : seen.entrySet()) {
            dups += e.getValue().get() - 1;
            if (!acked.containsKey(e.getKey())) {
                unacked++;
            }
        }
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("topic", topic);
        r.put("group", group);
        r.put("sent_ok", acked.size());
        r.put("send_not_ok", notOk.get());
        r.put("send_not_ok_statuses", new TreeMap<>(notOkStatuses));
        r.put("send_failed", failed.get());
        r.put("send_failures", new ArrayList<>(failures));
        r.put("received", deliveries.get());
        r.put("distinct", seen.size());
        r.put("duplicates", dups);
        r.put("missing", missing.size());
        r.put("missing_keys", missing.subList(0, Math.min(10, missing.size())));
        r.put("received_unacknowledged", unacked);
        r.put("produce_ms", stoppedAt - t0);
        r.put("drain_ms", drained);
        return r;
    }

    private static boolean allSeen(Map<String, Boolean> acked, Map<String, AtomicInteger> seen) {
        for (String k : acked.keySet()) {
            if (!seen.containsKey(k)) {
                return false;
            }
        }
        return true;
    }
}
