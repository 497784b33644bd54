package rmqproxy.scenarios;

import java.util.Arrays;
import java.util.Collection;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Scenarios 2-4, reading what the send scenario wrote (--manifest):
 * <ul>
 * <li>"push": a DefaultMQPushConsumer (CONSUME_FROM_FIRST_OFFSET, concurrently, subscription "*")
 * must receive every key of the manifest.</li>
 * <li>"litepull": a DefaultLitePullConsumer in subscribe mode, then another in assign mode (all
 * queues from fetchMessageQueues), each a new group, must each receive every key.</li>
 * <li>"tags": a push consumer subscribed to "TagA || TagB" must receive exactly the TagA/TagB keys.</li>
 * </ul>
 * Options: --manifest, --group (base consumer group), --timeout-ms (60000), --grace-ms (1000:
 * keep consuming after the last expected key, to count duplicates or unwanted tags).
 * Result: {@link Tracker#report} (expected, received, distinct, duplicates, missing, missing_keys,
 * missing_by_mode, unexpected, tags, queues, first_message_ms, ...) plus complete and elapsed_ms.
 */
final class ConsumeScenarios {
    private ConsumeScenarios() {
    }

    static Map<String, Object> push(Main.Args a) throws Exception {
        Manifest m = Manifest.read(a.get("manifest"));
        return pushRun(a, m, a.get("group"), "*", null);
    }

    static Map<String, Object> tags(Main.Args a) throws Exception {
        Manifest m = Manifest.read(a.get("manifest"));
        String expr = a.get("expression", "TagA || TagB");
        Set<String> wanted = new HashSet<>();
        for (String t : expr.split("\\|\\|")) {
            wanted.add(t.trim());
        }
        Map<String, Object> r = pushRun(a, m, a.get("group"), expr, wanted);
        r.put("expression", expr);
        r.put("wanted_tags", wanted);
        // Deliveries whose tag is outside the subscription (the client re-filters by tag string,
        // so these would mean the client-side filter was bypassed: never expected).
        int unwanted = 0;
        @SuppressWarnings("unchecked")
        Map<String, Integer> tagCounts = (Map<String, Integer>) r.get("tags");
        for (Map.Entry<String, Integer> e : tagCounts.entrySet()) {
            if (!wanted.contains(e.getKey())) {
                unwanted += e.getValue();
            }
        }
        r.put("unwanted_tag_deliveries", unwanted);
        return r;
    }

    private static Map<String, Object> pushRun(Main.Args a, Manifest m, String group, String expr, Set<String> wanted)
        throws Exception {
        Map<String, String> expected = m.expected(wanted);
        Tracker tracker = new Tracker(expected);
        long timeout = a.getLong("timeout-ms", 60000);
        long grace = a.getLong("grace-ms", 1000);
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(a.namesrv());
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(m.topic, expr);
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            tracker.recordAll(msgs);
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        long t0 = System.currentTimeMillis();
        boolean complete;
        try {
            c.start();
            Main.progress("# push consumer " + group + " started, expecting " + expected.size() + " keys");
            complete = awaitWithProgress(tracker, timeout);
            Main.sleep(grace);
        } finally {
            c.shutdown();
        }
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("group", group);
        r.put("topic", m.topic);
        r.put("complete", complete);
        r.put("elapsed_ms", System.currentTimeMillis() - t0);
        r.putAll(tracker.report(m.modes()));
        return r;
    }

    static Map<String, Object> litePull(Main.Args a) throws Exception {
        Manifest m = Manifest.read(a.get("manifest"));
        String group = a.get("group");
        String only = a.get("mode", "both");
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("topic", m.topic);
        for (String mode : Arrays.asList("subscribe", "assign")) {
            if (only.equals("both") || only.equals(mode)) {
                r.put(mode, litePullRun(a, m, group + "-" + mode, mode));
            }
        }
        return r;
    }

    private static Map<String, Object> litePullRun(Main.Args a, Manifest m, String group, String mode) throws Exception {
        Map<String, String> expected = m.expected(null);
        Tracker tracker = new Tracker(expected);
        long timeout = a.getLong("timeout-ms", 60000);
        long grace = a.getLong("grace-ms", 1000);
        DefaultLitePullConsumer c = new DefaultLitePullConsumer(group);
        c.setNamesrvAddr(a.namesrv());
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        long t0 = System.currentTimeMillis();
        boolean complete;
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("group", group);
        try {
            if (mode.equals("subscribe")) {
                c.subscribe(m.topic, "*");
                c.start();
            } else {
                c.start();
                Collection<MessageQueue> mqs = c.fetchMessageQueues(m.topic);
                r.put("assigned_queues", mqs.size());
                c.assign(mqs);
            }
            Main.progress("# lite pull consumer " + group + " (" + mode + ") started");
            long deadline = t0 + timeout;
            long nextReport = t0 + 2000;
            while (!tracker.complete() && System.currentTimeMillis() < deadline) {
                List<MessageExt> batch = c.poll(500);
                tracker.recordAll(batch);
                if (System.currentTimeMillis() > nextReport) {
                    Main.progress("# " + mode + " received " + tracker.expectedReceived() + "/" + expected.size());
                    nextReport += 2000;
                }
            }
            complete = tracker.complete();
            long graceEnd = System.currentTimeMillis() + grace;
            while (System.currentTimeMillis() < graceEnd) {
                tracker.recordAll(c.poll(200));
            }
        } finally {
            c.shutdown();
        }
        r.put("complete", complete);
        r.put("elapsed_ms", System.currentTimeMillis() - t0);
        r.putAll(tracker.report(m.modes()));
        return r;
    }

    /** Wait for the tracker, printing a progress line every 2 s. */
    static boolean awaitWithProgress(Tracker tracker, long timeoutMs) {
        long deadline = System.currentTimeMillis() + timeoutMs;
        long nextReport = System.currentTimeMillis() + 2000;
        while (!tracker.complete() && System.currentTimeMillis() < deadline) {
            Main.sleep(20);
            if (System.currentTimeMillis() > nextReport) {
                Main.progress("# received " + tracker.expectedReceived() + " expected keys, " + tracker.deliveries()
                    + " deliveries");
                nextReport += 2000;
            }
        }
        return tracker.complete();
    }
}
