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
 * <p>Without --crash, message i is decided by the local transaction: i % 3 == 0 commits, 1 rolls
 * back, 2 answers UNKNOW and commits when the broker checks it back. The run ends once every
 * committed key arrived and --grace-ms (3000) passed with nothing more, or after --timeout-ms.
 *
 * <p>With --crash true, every local transaction answers UNKNOW and so does every check, and the
 * program prints "PROGRESS prepared=N checks=C received=R" until a line arrives on stdin (the test
 * kills the broker with -9 and restarts it meanwhile). From then on checks decide: i even commits,
 * i odd rolls back.
 *
 * <p>Result: sent (SEND_OK half messages), expected (committed keys), received (key -> times),
 * missing, unexpected (rolled-back or unknown keys that arrived), duplicates, checks (key -> check
 * calls), elapsed_ms.
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
            if (crash ? i % 2 == 0 : i % 3 != 1) {
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
                if (crash || i % 3 == 2) {
                    return LocalTransactionState.UNKNOW;
                }
                return i % 3 == 0 ? LocalTransactionState.COMMIT_MESSAGE : LocalTransactionState.ROLLBACK_MESSAGE;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                checks.computeIfAbsent(msg.getKeys(), k -> new AtomicInteger()).incrementAndGet();
                if (!deciding.get()) {
                    return LocalTransactionState.UNKNOW;
                }
                int i = index(msg.getKeys());
                boolean commit = crash ? i % 2 == 0 : i % 3 != 1;
                return commit ? LocalTransactionState.COMMIT_MESSAGE : LocalTransactionState.ROLLBACK_MESSAGE;
            }
        });
        producer.start();
        // the topic exists before the consumer looks for its route
        Main.setupSend(producer, new Message(topic, "Setup", "setup", "setup".getBytes(StandardCharsets.UTF_8)));

        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(a.namesrv());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "Tx");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                received.computeIfAbsent(m.getKeys(), k -> new AtomicInteger()).incrementAndGet();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
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
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (System.currentTimeMillis() < deadline && !received.keySet().containsAll(expected)) {
            Main.sleep(100);
        }
        Main.sleep(graceMs);  // anything that should not arrive has had its chance
        consumer.shutdown();
        producer.shutdown();

        Map<String, Object> r = new LinkedHashMap<>();
        r.put("sent", sent);
        r.put("send_failures", failures);
        r.put("expected", expected.size());
        Map<String, Integer> got = new TreeMap<>();
        received.forEach((k, v) -> got.put(k, v.get()));
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
        Map<String, Integer> checked = new TreeMap<>();
        checks.forEach((k, v) -> checked.put(k, v.get()));
        r.put("checks", checked);
        r.put("elapsed_ms", System.currentTimeMillis() - start);
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
