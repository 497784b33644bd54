package rmqproxy.scenarios;

import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.consumer.AllocateMessageQueueStrategy;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.impl.consumer.ProcessQueue;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Scenario 7, "rebalance": a fresh topic with --queues (8) queues, auto-created by a producer with
 * defaultTopicQueueNums = 8 that sends --count (80) messages; push consumer A starts and takes every
 * queue; consumer B (same group, another instance name) starts and the two split the queues; A shuts
 * down and B must take every queue.
 *
 * <p>A consumer's assignment is what its rebalance put in its process-queue table (entries not
 * dropped); every allocation decision is also recorded through a wrapper around the default
 * AllocateMessageQueueAveragely strategy.  Result: route_queues, a_alone {queues, ms}, split {a, b,
 * ms}, takeover {b, ms (from A's shutdown() returning), shutdown_ms}, consumed/expected, allocations
 * (last 20 decisions: consumer, cids, queues).
 */
final class RebalanceScenario {
    private RebalanceScenario() {
    }

    /** Delegates to AllocateMessageQueueAveragely and records each decision. */
    static final class Recording implements AllocateMessageQueueStrategy {
        private final AllocateMessageQueueStrategy inner = new AllocateMessageQueueAveragely();
        private final String label;
        private final List<Map<String, Object>> log;
        private final long t0;

        Recording(String label, List<Map<String, Object>> log, long t0) {
            this.label = label;
            this.log = log;
            this.t0 = t0;
        }

        @Override
        public List<MessageQueue> allocate(String group, String currentCID, List<MessageQueue> mqAll, List<String> cidAll) {
            List<MessageQueue> result = inner.allocate(group, currentCID, mqAll, cidAll);
            if (mqAll != null && !mqAll.isEmpty() && !mqAll.get(0).getTopic().startsWith("%RETRY%")) {
                Map<String, Object> e = new LinkedHashMap<>();
                e.put("consumer", label);
                e.put("ms", System.currentTimeMillis() - t0);
                e.put("cids", cidAll == null ? 0 : cidAll.size());
                e.put("all", mqAll.size());
                e.put("queues", queueIds(result));
                synchronized (log) {
                    log.add(e);
                }
            }
            return result;
        }

        @Override
        public String getName() {
            return inner.getName();
        }
    }

    static List<Integer> queueIds(Collection<MessageQueue> mqs) {
        TreeSet<Integer> ids = new TreeSet<>();
        if (mqs != null) {
            for (MessageQueue mq : mqs) {
                ids.add(mq.getQueueId());
            }
        }
        return new ArrayList<>(ids);
    }

    static List<Integer> assigned(DefaultMQPushConsumer c, String topic) {
        List<MessageQueue> mqs = new ArrayList<>();
        Map<MessageQueue, ProcessQueue> table = c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable();
        for (Map.Entry<MessageQueue, ProcessQueue> e : table.entrySet()) {
            if (e.getKey().getTopic().equals(topic) && !e.getValue().isDropped()) {
                mqs.add(e.getKey());
            }
        }
        return queueIds(mqs);
    }

    static Map<String, Object> run(Main.Args a) throws Exception {
        String topic = a.get("topic");
        String group = a.get("group");
        int queues = a.getInt("queues", 8);
        int count = a.getInt("count", 80);
        long phaseTimeout = a.getLong("phase-timeout-ms", 30000);
        long t0 = System.currentTimeMillis();
        String pid = ManagementFactory.getRuntimeMXBean().getName().split("@")[0];
        List<Map<String, Object>> allocations = Collections.synchronizedList(new ArrayList<>());
        Map<String, Boolean> consumed = new ConcurrentHashMap<>();
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("topic", topic);
        r.put("group", group);

        DefaultMQProducer producer = new DefaultMQProducer(group + "-producer");
        producer.setNamesrvAddr(a.namesrv());
        producer.setDefaultTopicQueueNums(queues);
        producer.start();
        Set<Integer> sentQueues = new HashSet<>();
        try {
            for (int i = 0; i < count; i++) {
                String key = topic + "-" + i;
                SendResult sr = Main.setupSend(producer, new Message(topic, "TagA", key, key.getBytes(StandardCharsets.UTF_8)));
                sentQueues.add(sr.getMessageQueue().getQueueId());
            }
        } finally {
            producer.shutdown();
        }
        r.put("sent_queues", new ArrayList<>(new TreeSet<>(sentQueues)));

        MessageListenerConcurrently listener = (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                consumed.put(m.getKeys(), true);
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        };
        DefaultMQPushConsumer ca = consumer(a, group, "A" + pid, new Recording("A", allocations, t0), listener, topic);
        DefaultMQPushConsumer cb = consumer(a, group, "B" + pid, new Recording("B", allocations, t0), listener, topic);
        boolean aDown = false;
        try {
            long s = System.currentTimeMillis();
            ca.start();
            r.put("route_queues", ca.fetchSubscribeMessageQueues(topic).size());
            while (assigned(ca, topic).size() < queues && System.currentTimeMillis() - s < phaseTimeout) {
                Main.sleep(10);
            }
            Map<String, Object> alone = new LinkedHashMap<>();
            alone.put("queues", assigned(ca, topic));
            alone.put("ms", System.currentTimeMillis() - s);
            r.put("a_alone", alone);
            Main.progress("# A alone: " + alone);

            s = System.currentTimeMillis();
            cb.start();
            List<Integer> qa;
            List<Integer> qb;
            while (true) {
                qa = assigned(ca, topic);
                qb = assigned(cb, topic);
                if (isSplit(qa, qb, queues) || System.currentTimeMillis() - s > phaseTimeout) {
                    break;
                }
                Main.sleep(10);
            }
            Map<String, Object> split = new LinkedHashMap<>();
            split.put("a", qa);
            split.put("b", qb);
            split.put("ok", isSplit(qa, qb, queues));
            split.put("ms", System.currentTimeMillis() - s);
            r.put("split", split);
            Main.progress("# split: " + split);

            long sd = System.currentTimeMillis();
            ca.shutdown();
            aDown = true;
            s = System.currentTimeMillis();
            while (assigned(cb, topic).size() < queues && System.currentTimeMillis() - s < phaseTimeout) {
                Main.sleep(5);
            }
            Map<String, Object> takeover = new LinkedHashMap<>();
            takeover.put("b", assigned(cb, topic));
            takeover.put("ms", System.currentTimeMillis() - s);
            takeover.put("shutdown_ms", s - sd);
            r.put("takeover", takeover);
            Main.progress("# takeover: " + takeover);

            long drainEnd = System.currentTimeMillis() + 15000;
            while (consumed.size() < count && System.currentTimeMillis() < drainEnd) {
                Main.sleep(20);
            }
        } finally {
            if (!aDown) {
                ca.shutdown();
            }
            cb.shutdown();
        }
        r.put("expected", count);
        r.put("consumed", consumed.size());
        r.put("allocations", new ArrayList<>(allocations.subList(Math.max(0, allocations.size() - 20), allocations.size())));
        return r;
    }

    private static boolean isSplit(List<Integer> qa, List<Integer> qb, int queues) {
        if (qa.isEmpty() || qb.isEmpty() || qa.size() + qb.size() != queues) {
            return false;
        }
        Set<Integer> union = new HashSet<>(qa);
        union.addAll(qb);
        return union.size() == queues;
    }

    private static DefaultMQPushConsumer consumer(Main.Args a, String group, String instance,
        AllocateMessageQueueStrategy strategy, MessageListenerConcurrently listener, String topic) throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(a.namesrv());
        c.setInstanceName(instance);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setAllocateMessageQueueStrategy(strategy);
        c.subscribe(topic, "*");
        c.registerMessageListener(listener);
        return c;
    }
}
