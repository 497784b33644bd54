package rmqproxy.scenarios;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Scenario "timer": a push consumer of --topic starts, then --per (3) messages for each delay of
 * --delays-ms (1000,3000,10000) are sent, the three timer properties in turn (TIMER_DELAY_SEC,
 * TIMER_DELAY_MS, TIMER_DELIVER_MS; set through MessageAccessor, which both client lines have).
 * With --pause true the program then prints "PROGRESS sent=N received=R" until a line arrives on
 * stdin (the test restarts the broker meanwhile). It waits until every message arrived or
 * --timeout-ms (60000).
 *
 * <p>Result: sent, records (key, delay_ms, late_ms: its arrival minus its due time, counted from just
 * before its send; negative when early), missing, duplicates.
 */
final class TimerScenario {
    private TimerScenario() {
    }

    static Map<String, Object> run(Main.Args a) throws Exception {
        String topic = a.get("topic");
        String group = a.get("group");
        int per = a.getInt("per", 3);
        boolean pause = Boolean.parseBoolean(a.get("pause", "false"));
        long timeoutMs = a.getLong("timeout-ms", 60000);
        List<Long> delays = new ArrayList<>();
        for (String d : a.get("delays-ms", "1000,3000,10000").split(",")) {
            delays.add(Long.parseLong(d.trim()));
        }
        Map<String, Long> arrived = new ConcurrentHashMap<>();
        Map<String, Integer> times = new ConcurrentHashMap<>();

        DefaultMQProducer producer = new DefaultMQProducer(group + "-producer");
        producer.setNamesrvAddr(a.namesrv());
        producer.start();
        Main.setupSend(producer, new Message(topic, "Setup", "setup".getBytes(StandardCharsets.UTF_8)));
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(a.namesrv());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "Timed");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            long now = System.currentTimeMillis();
            for (MessageExt m : msgs) {
                arrived.putIfAbsent(m.getKeys(), now);
                times.merge(m.getKeys(), 1, Integer::sum);
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        Main.sleep(3000);  // rebalanced: its pulls wait at the queues' ends

        String[] kinds = {"TIMER_DELAY_SEC", "TIMER_DELAY_MS", "TIMER_DELIVER_MS"};
        Map<String, long[]> sent = new LinkedHashMap<>();  // key -> {delay, due}
        int n = 0;
        for (long delay : delays) {
            for (int i = 0; i < per; i++) {
                String key = topic + "-" + delay + "-" + i;
                String kind = kinds[n++ % kinds.length];
                Message m = new Message(topic, "Timed", key, key.getBytes(StandardCharsets.UTF_8));
                long before = System.currentTimeMillis();
                String value = kind.equals("TIMER_DELAY_SEC") ? Long.toString(delay / 1000)
                    : kind.equals("TIMER_DELAY_MS") ? Long.toString(delay) : Long.toString(before + delay);
                MessageAccessor.putProperty(m, kind, value);
                SendResult r = producer.send(m);
                if (r.getSendStatus() == SendStatus.SEND_OK) {
                    sent.put(key, new long[] {delay, before + delay});
                }
            }
        }
        if (pause) {
            Thread reporter = new Thread(() -> {
                while (true) {
                    Main.progress("PROGRESS sent=" + sent.size() + " received=" + arrived.size());
                    Main.sleep(250);
                }
            }, "scenario-progress");
            reporter.setDaemon(true);
            reporter.start();
            Main.awaitStop();
        }
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (System.currentTimeMillis() < deadline && !arrived.keySet().containsAll(sent.keySet())) {
            Main.sleep(50);
        }
        Main.sleep(1000);
        consumer.shutdown();
        producer.shutdown();

        List<Map<String, Object>> records = new ArrayList<>();
        List<String> missing = new ArrayList<>();
        List<String> duplicates = new ArrayList<>();
        for (Map.Entry<String, long[]> e : sent.entrySet()) {
            Long at = arrived.get(e.getKey());
            if (at == null) {
                missing.add(e.getKey());
                continue;
            }
            if (times.get(e.getKey()) > 1) {
                duplicates.add(e.getKey());
            }
            Map<String, Object> rec = new LinkedHashMap<>();
            rec.put("key", e.getKey());
            rec.put("delay_ms", e.getValue()[0]);
            rec.put("late_ms", at - e.getValue()[1]);
            records.add(rec);
        }
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("sent", sent.size());
        r.put("records", records);
        r.put("missing", missing);
        r.put("duplicates", duplicates);
        return r;
    }
}
