package rmqproxy.scenarios;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Scenario 5, "retry": --count (1) messages to a fresh topic; a push consumer (group --group,
 * maxReconsumeTimes --max-reconsume, default 2) answers RECONSUME_LATER every time.  Each message
 * must come back with reconsumeTimes 0, 1, ..., max and then land in %DLQ%{group}, read back with a
 * DefaultMQPullConsumer.
 *
 * <p>A fresh group's consumer fetches the route of %RETRY%{group} when it starts, before its first
 * heartbeat (which is what creates that topic on a reference broker), so with default settings the
 * retry queue is assigned only after the next route poll (30 s) and the rebalance after it (20 s).
 * This scenario therefore sets pollNameServerInterval to --poll-namesrv-ms (1000) and the system
 * property rocketmq.client.rebalance.waitInterval to --rebalance-interval-ms (1000).
 * --settle-ms (3000): how long to keep watching for extra deliveries after the DLQ was read.
 *
 * <p>Result: sequences {key: [reconsumeTimes...]}, delivery_ms {key: [ms since the send]},
 * deliveries (first 30: key, topic, reconsume_times, queue_id, retry_topic), dlq {topic, queues,
 * found, missing_keys, messages}.
 */
final class RetryScenario {
    private RetryScenario() {
    }

    static Map<String, Object> run(Main.Args a) throws Exception {
        String topic = a.get("topic");
        String group = a.get("group");
        int count = a.getInt("count", 1);
        int max = a.getInt("max-reconsume", 2);
        long timeout = a.getLong("timeout-ms", 60000);
        long settle = a.getLong("settle-ms", 3000);
        int pollMs = a.getInt("poll-namesrv-ms", 1000);
        String prefix = a.get("key-prefix", topic);
        // RebalanceService reads this once, when the first client instance of this JVM is created.
        System.setProperty("rocketmq.client.rebalance.waitInterval", a.get("rebalance-interval-ms", "1000"));

        Map<String, List<Integer>> sequences = new ConcurrentHashMap<>();
        Map<String, List<Long>> times = new ConcurrentHashMap<>();
        List<Map<String, Object>> deliveries = new ArrayList<>();
        List<String> keys = new ArrayList<>();
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("topic", topic);
        r.put("group", group);
        r.put("max_reconsume_times", max);

        DefaultMQProducer producer = new DefaultMQProducer(group + "-producer");
        producer.setNamesrvAddr(a.namesrv());
        producer.start();
        List<String> sendStatuses = new ArrayList<>();
        long t0;
        try {
            t0 = System.currentTimeMillis();
            for (int i = 0; i < count; i++) {
                String key = prefix + "-retry-" + i;
                keys.add(key);
                SendResult sr = Main.setupSend(producer, new Message(topic, "TagA", key, ("retry me " + i).getBytes()));
                sendStatuses.add(sr.getSendStatus().name());
            }
        } finally {
            producer.shutdown();
        }
        r.put("send_statuses", sendStatuses);

        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(a.namesrv());
        c.setPollNameServerInterval(pollMs);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setMaxReconsumeTimes(max);
        c.subscribe(topic, "*");
        final long start = t0;
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            long now = System.currentTimeMillis();
            for (MessageExt m : msgs) {
                String key = m.getKeys();
                sequences.computeIfAbsent(key, k -> java.util.Collections.synchronizedList(new ArrayList<>()))
                    .add(m.getReconsumeTimes());
                times.computeIfAbsent(key, k -> java.util.Collections.synchronizedList(new ArrayList<>()))
                    .add(now - start);
                synchronized (deliveries) {
                    if (deliveries.size() < 30) {
                        Map<String, Object> d = new LinkedHashMap<>();
                        d.put("key", key);
                        d.put("topic", m.getTopic());
                        d.put("reconsume_times", m.getReconsumeTimes());
                        d.put("queue_id", m.getQueueId());
                        d.put("retry_topic", m.getProperty(MessageConst.PROPERTY_RETRY_TOPIC));
                        d.put("ms", now - start);
                        deliveries.add(d);
                    }
                }
                Main.progress("# delivery " + key + " reconsumeTimes=" + m.getReconsumeTimes() + " at "
                    + (now - start) + " ms");
            }
            return ConsumeConcurrentlyStatus.RECONSUME_LATER;
        });
        Map<String, Object> dlq;
        try {
            c.start();
            long deadline = System.currentTimeMillis() + timeout;
            while (System.currentTimeMillis() < deadline && !allDelivered(sequences, keys, max + 1)) {
                Main.sleep(20);
            }
            r.put("all_delivered", allDelivered(sequences, keys, max + 1));
            r.put("last_delivery_ms", System.currentTimeMillis() - start);
            dlq = readDlq(a, group, keys, Math.max(10000, deadline - System.currentTimeMillis()));
            long settleEnd = System.currentTimeMillis() + settle;
            while (System.currentTimeMillis() < settleEnd) {
                Main.sleep(50);
            }
        } finally {
            c.shutdown();
        }
        Map<String, Object> seq = new LinkedHashMap<>();
        Map<String, Object> tms = new LinkedHashMap<>();
        for (String k : keys) {
            seq.put(k, sequences.getOrDefault(k, new ArrayList<>()));
            tms.put(k, times.getOrDefault(k, new ArrayList<>()));
        }
        r.put("sequences", seq);
        r.put("delivery_ms", tms);
        r.put("deliveries", deliveries);
        r.put("dlq", dlq);
        return r;
    }

    private static boolean allDelivered(Map<String, List<Integer>> sequences, List<String> keys, int n) {
        for (String k : keys) {
            List<Integer> s = sequences.get(k);
            if (s == null || s.size() < n) {
                return false;
            }
        }
        return true;
    }

    /**
     * Read %DLQ%{group} from offset 0 with a DefaultMQPullConsumer (PULL_MESSAGE, code 11).  Not a
     * lite pull consumer: 5.x lite pull sends LITE_PULL_MESSAGE (361), which 4.9.x brokers reject.
     */
    @SuppressWarnings("deprecation")
    private static Map<String, Object> readDlq(Main.Args a, String group, List<String> keys, long timeoutMs)
        throws Exception {
        String dlqTopic = MixAll.DLQ_GROUP_TOPIC_PREFIX + group;
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("topic", dlqTopic);
        List<Map<String, Object>> messages = new ArrayList<>();
        Map<String, Boolean> found = new LinkedHashMap<>();
        DefaultMQPullConsumer reader = new DefaultMQPullConsumer(group + "-dlq-reader");
        reader.setNamesrvAddr(a.namesrv());
        long deadline = System.currentTimeMillis() + timeoutMs;
        String error = null;
        try {
            reader.start();
            Collection<MessageQueue> mqs = null;
            while (mqs == null && System.currentTimeMillis() < deadline) {
                try {
                    mqs = reader.fetchSubscribeMessageQueues(dlqTopic);
                } catch (Exception e) {
                    error = Main.describe(e);
                    Main.sleep(250);
                }
            }
            if (mqs == null) {
                r.put("route_error", error);
                mqs = new ArrayList<>();
            }
            r.put("queues", mqs.size());
            Map<MessageQueue, Long> next = new HashMap<>();
            while (!mqs.isEmpty() && found.size() < keys.size() && System.currentTimeMillis() < deadline) {
                for (MessageQueue mq : mqs) {
                    PullResult pr;
                    try {
                        pr = reader.pull(mq, "*", next.getOrDefault(mq, 0L), 32);
                    } catch (Exception e) {
                        error = Main.describe(e);
                        Main.sleep(250);
                        continue;
                    }
                    next.put(mq, pr.getNextBeginOffset());
                    if (pr.getPullStatus() != PullStatus.FOUND || pr.getMsgFoundList() == null) {
                        continue;
                    }
                    for (MessageExt m : pr.getMsgFoundList()) {
                        if (keys.contains(m.getKeys())) {
                            found.put(m.getKeys(), true);
                        }
                        if (messages.size() < 20) {
                            Map<String, Object> d = new LinkedHashMap<>();
                            d.put("key", m.getKeys());
                            d.put("topic", m.getTopic());
                            d.put("reconsume_times", m.getReconsumeTimes());
                            d.put("queue_id", m.getQueueId());
                            d.put("queue_offset", m.getQueueOffset());
                            d.put("retry_topic", m.getProperty(MessageConst.PROPERTY_RETRY_TOPIC));
                            d.put("origin_message_id", m.getProperty(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID));
                            d.put("body", new String(m.getBody(), StandardCharsets.UTF_8));
                            messages.add(d);
                        }
                    }
                }
                if (found.size() < keys.size()) {
                    Main.sleep(200);
                }
            }
        } finally {
            reader.shutdown();
        }
        List<String> missing = new ArrayList<>();
        for (String k : keys) {
            if (!found.containsKey(k)) {
                missing.add(k);
            }
        }
        r.put("found", found.size());
        r.put("missing_keys", missing);
        r.put("last_error", error);
        r.put("messages", messages);
        return r;
    }
}
