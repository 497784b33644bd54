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
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Scenario "transaction": a TransactionMQProducer sends --count (30) messages to --topic while a
 * push consumer of --group reads the topic from its first offset.
 *
 * <p>Message i is decided by i % 3: 0 commits in the local transaction, 1 rolls back, 2 answers
 * UNKNOW and commits when the broker checks it back. A check of a 0 answers COMMIT_MESSAGE (its
 * local transaction did commit). The run ends once every committed key arrived and --grace-ms
 * (3000) passed with nothing more, or after --timeout-ms.
 *
 * <p>With --crash true, the 1s answer UNKNOW too, every check of a 1 or a 2 answers UNKNOW, and the
 * program prints "PROGRESS prepared=N checks=C received=R" until a line arrives on stdin (the test
 * waits for the 0s to arrive, kills the broker with -9 and restarts it meanwhile). From then on
 * checks decide (1 rolls back, 2 commits), and a second push consumer, of group --group + "-late",
 * reads the topic from its first offset: what the restarted broker stored, committed before the kill
 * or after.
 *
 * <p>Result: sent (SEND_OK half messages), expected (committed keys), received (key -> times),
 * missing, unexpected (rolled-back or unknown keys that arrived), duplicates, checks (key -> check
 * calls), elapsed_ms; with --crash also received_before_decisions (received when the stdin line
 * came) and late (received, missing, unexpected, duplicates of the second consumer).
 */
final class TransactionScenario {
    private TransactionScenario() {
    }

    static Map<String, Object> run(Main.Args a) throws Exception {
        String topic = a.get("topic");
        String group = a.get("group");
        int count = a.getInt("count", 30);
        boolean crash = Boolean.parseBoolean(a.get("crash", "false"));
        long timeoutMs = a.getLong("timeout-ms", 90000);
        long graceMs = a.getLong("grace-ms", 3000);
        AtomicBoolean deciding = new AtomicBoolean(!crash);
        Map<String, AtomicInteger> checks = new ConcurrentHashMap<>();
        Map<String, AtomicInteger> received = new ConcurrentHashMap<>();
        List<String> expected = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            if (i % 3 != 1) {
                expected.add(key(topic, i));
            }
        }

        TransactionMQProducer producer = new TransactionMQProducer(group + "-tx");
        producer.setNamesrvAddr(a.namesrv());
        producer.setHeartbeatBrokerInterval(1000);  // re-registers with a restarted broker quickly
        producer.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                int i = index(msg.getKeys());
                if (i % 3 == 0) {
                    return LocalTransactionState.COMMIT_MESSAGE;
                }
                return crash || i % 3 == 2 ? LocalTransactionState.UNKNOW : LocalTransactionState.ROLLBACK_MESSAGE;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                checks.computeIfAbsent(msg.getKeys(), k -> new AtomicInteger()).incrementAndGet();
                int i = index(msg.getKeys());
                if (i % 3 == 0) {
                    return LocalTransactionState.COMMIT_MESSAGE;  // committed locally at once
                }
                if (!deciding.get()) {
                    return LocalTransactionState.UNKNOW;
                }
                return i % 3 == 2 ? LocalTransactionState.COMMIT_MESSAGE : LocalTransactionState.ROLLBACK_MESSAGE;
            }
        });
        producer.start();
        // the topic exists before the consumer looks for its route
        Main.setupSend(producer, new Message(topic, "Setup", "setup", "setup".getBytes(StandardCharsets.UTF_8)));

        DefaultMQPushConsumer consumer = consumer(a, topic, group, received);
        consumer.start();

        long start = System.currentTimeMillis();
        int sent = 0;
        List<String> failures = Collections.synchronizedList(new ArrayList<>());
        for (int i = 0; i < count; i++) {
            String k = key(topic, i);
            try {
                SendResult r = producer.sendMessageInTransaction(new Message(topic, "Tx", k, k.getBytes(StandardCharsets.UTF_8)), null);
                if (r.getSendStatus() == SendStatus.SEND_OK) {
                    sent++;
                } else {
                    failures.add(k + ": " + r.getSendStatus());
                }
            } catch (Exception e) {
                failures.add(k + ": " + Main.describe(e));
            }
        }
        if (crash) {
            int prepared = sent;
            Thread reporter = new Thread(() -> {
                while (!deciding.get()) {
                    Main.progress("PROGRESS prepared=" + prepared + " checks=" + total(checks) + " received=" + total(received));
                    Main.sleep(250);
                }
            }, "scenario-progress");
            reporter.setDaemon(true);
            reporter.start();
            Main.awaitStop();
            deciding.set(true);
        }
        Map<String, Integer> beforeDecisions = snapshot(received);
        Map<String, AtomicInteger> lateReceived = new ConcurrentHashMap<>();
        DefaultMQPushConsumer late = null;
        if (crash) {
            late = consumer(a, topic, group + "-late", lateReceived);
            late.start();
        }
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (System.currentTimeMillis() < deadline && !(received.keySet().containsAll(expected)
            && (late == null || lateReceived.keySet().containsAll(expected)))) {
            Main.sleep(100);
        }
        Main.sleep(graceMs);  // anything that should not arrive has had its chance
        consumer.shutdown();
        if (late != null) {
            late.shutdown();
        }
        producer.shutdown();

        Map<String, Object> r = new LinkedHashMap<>();
        r.put("sent", sent);
        r.put("send_failures", failures);
        r.put("expected", expected.size());
        r.putAll(outcome(expected, snapshot(received)));
        r.put("checks", snapshot(checks));
        if (crash) {
            r.put("received_before_decisions", beforeDecisions);
            r.put("late", outcome(expected, snapshot(lateReceived)));
        }
        r.put("elapsed_ms", System.currentTimeMillis() - start);
        return r;
    }

    /** A push consumer of tag Tx on topic from its first offset, counting keys into received. */
    static DefaultMQPushConsumer consumer(Main.Args a, String topic, String group, Map<String, AtomicInteger> received)
        throws Exception {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(a.namesrv());
        // as the producer's: a restarted broker knows the group again within a second (a 4.9.7 broker
        // answers its pulls 24, group info not exist, until then), and while the test holds the
        // broker stopped to kill it, the consumer's connection carries a request within a second
        consumer.setHeartbeatBrokerInterval(1000);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "Tx");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                received.computeIfAbsent(m.getKeys(), k -> new AtomicInteger()).incrementAndGet();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        return consumer;
    }

    /** received (key -> times), missing and unexpected keys, and the keys that arrived more than once. */
    static Map<String, Object> outcome(List<String> expected, Map<String, Integer> got) {
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("received", got);
        List<String> missing = new ArrayList<>();
        for (String k : expected) {
            if (!got.containsKey(k)) {
                missing.add(k);
            }
        }
        r.put("missing", missing);
        List<String> unexpected = new ArrayList<>();
        List<String> duplicates = new ArrayList<>();
        for (Map.Entry<String, Integer> e : got.entrySet()) {
            if (!expected.contains(e.getKey())) {
                unexpected.add(e.getKey());
            }
            if (e.getValue() > 1) {
                duplicates.add(e.getKey());
            }
        }
        r.put("unexpected", unexpected);
        r.put("duplicates", duplicates);
        return r;
    }

    static Map<String, Integer> snapshot(Map<String, AtomicInteger> counts) {
        Map<String, Integer> r = new TreeMap<>();
        counts.forEach((k, v) -> r.put(k, v.get()));
        return r;
    }

    static String key(String topic, int i) {
        return topic + "-" + i;
    }

    static int index(String key) {
        return Integer.parseInt(key.substring(key.lastIndexOf('-') + 1));
    }

    static int total(Map<String, AtomicInteger> counts) {
        int n = 0;
        for (AtomicInteger v : counts.values()) {
            n += v.get();
        }
        return n;
    }
}
