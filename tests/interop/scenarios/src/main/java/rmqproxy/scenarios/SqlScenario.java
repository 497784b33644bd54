package rmqproxy.scenarios;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Scenario "sql": push consumers subscribed with MessageSelector.bySql, one per --expressions entry
 * (separated by ";;"), each in its own group, started before anything is sent, so their pulls are
 * held and woken by arrivals. Then --count (60) messages go to --topic: message i has the user
 * properties n=i, color=red|green|blue (i % 3) and, for even i, size=big, with tag TagA (i % 2 ==
 * 0) or TagB. Each consumer runs until --wait-ms (8000) pass with nothing new, or, with --expect
 * (a count per expression, separated by ";;"), until every consumer has received at least its count
 * of distinct messages and --settle-ms (2000) passed with nothing new.
 *
 * <p>--invalid EXPR also starts a consumer with that expression, which must fail in start().
 *
 * <p>Result: per expression, the sorted list of received n values and the duplicates; for the
 * invalid expression, start_error (the exception's text) or "started".
 */
final class SqlScenario {
    private SqlScenario() {
    }

    static Map<String, Object> run(Main.Args a) throws Exception {
        String topic = a.get("topic");
        String group = a.get("group");
        int count = a.getInt("count", 60);
        long waitMs = a.getLong("wait-ms", 8000);
        String[] expressions = a.get("expressions").split(";;");
        Map<String, Object> result = new LinkedHashMap<>();

        DefaultMQProducer producer = new DefaultMQProducer(group + "-producer");
        producer.setNamesrvAddr(a.namesrv());
        producer.start();
        Main.setupSend(producer, new Message(topic, "Setup", "setup".getBytes(StandardCharsets.UTF_8)));

        String invalid = a.get("invalid", "");
        if (!invalid.isEmpty()) {
            DefaultMQPushConsumer bad = new DefaultMQPushConsumer(group + "-invalid");
            bad.setNamesrvAddr(a.namesrv());
            try {
                bad.subscribe(topic, MessageSelector.bySql(invalid));
                bad.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> ConsumeConcurrentlyStatus.CONSUME_SUCCESS);
                bad.start();
                result.put("invalid_start", "started");
            } catch (Exception e) {
                result.put("invalid_start", Main.describe(e));
            } finally {
                bad.shutdown();
            }
        }

        List<DefaultMQPushConsumer> consumers = new ArrayList<>();
        List<Map<Integer, Integer>> seen = new ArrayList<>();
        long[] last = {System.currentTimeMillis()};
        for (int e = 0; e < expressions.length; e++) {
            Map<Integer, Integer> got = new ConcurrentHashMap<>();
            seen.add(got);
            DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group + "-" + e);
            consumer.setNamesrvAddr(a.namesrv());
            consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            consumer.subscribe(topic, MessageSelector.bySql(expressions[e]));
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    String n = m.getUserProperty("n");
                    if (n != null) {
                        got.merge(Integer.parseInt(n), 1, Integer::sum);
                    }
                }
                last[0] = System.currentTimeMillis();
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            consumer.start();
            consumers.add(consumer);
        }
        Main.sleep(3000);  // rebalanced, and their pulls are held at the queues' ends
        String[] colors = {"red", "green", "blue"};
        for (int i = 0; i < count; i++) {
            Message m = new Message(topic, i % 2 == 0 ? "TagA" : "TagB", ("m" + i).getBytes(StandardCharsets.UTF_8));
            m.putUserProperty("n", Integer.toString(i));
            m.putUserProperty("color", colors[i % 3]);
            if (i % 2 == 0) {
                m.putUserProperty("size", "big");
            }
            producer.send(m);
        }
        last[0] = System.currentTimeMillis();
        String[] expect = a.get("expect", "").isEmpty() ? new String[0] : a.get("expect").split(";;");
        long settleMs = a.getLong("settle-ms", 2000);
        while (System.currentTimeMillis() - last[0] < waitMs) {
            if (expect.length == expressions.length && System.currentTimeMillis() - last[0] >= settleMs) {
                boolean all = true;
                for (int e = 0; e < expressions.length; e++) {
                    all &= seen.get(e).size() >= Integer.parseInt(expect[e]);
                }
                if (all) {
                    break;  // every consumer has its count and nothing more came for settle-ms
                }
            }
            Main.sleep(200);
        }
        for (DefaultMQPushConsumer c : consumers) {
            c.shutdown();
        }
        producer.shutdown();
        List<Map<String, Object>> per = new ArrayList<>();
        for (int e = 0; e < expressions.length; e++) {
            Map<String, Object> r = new LinkedHashMap<>();
            r.put("expression", expressions[e]);
            Set<Integer> ns = new TreeSet<>(seen.get(e).keySet());
            r.put("received", new ArrayList<>(ns));
            List<Integer> dups = new ArrayList<>();
            seen.get(e).forEach((n, times) -> {
                if (times > 1) {
                    dups.add(n);
                }
            });
            r.put("duplicates", dups);
            per.add(r);
        }
        result.put("consumers", per);
        return result;
    }
}
