package rmqproxy.scenarios;

import java.util.Arrays;
import java.util.Collection;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;

/**
 * Scenarios 2-4, reading what the send scenario wrote (--manifest):
 * <ul>
 * <li>"push": a DefaultMQPushConsumer (CONSUME_FROM_FIRST_OFFSET, concurrently, subscription "*")
 * must receive every key of the manifest.</li>
 * <li>"litepull": a DefaultLitePullConsumer in subscribe mode, then another in assign mode (all
 * queues from fetchMessageQueues), each a new group, must each receive every key.</li>
 * <li>"tags": a push consumer subscribed to "TagA || TagB" must receive exactly the TagA/TagB keys.</li>
 * <li>"tagskip": a push consumer subscribed to --expression (default "TagA") that matches none of
 * the messages; runs until a line on stdin (see {@link #tagSkip}).</li>
 * </ul>
 * Options: --manifest, --group (base consumer group), --from (first or last: where a group without
 * an offset starts, default first), --timeout-ms (60000), --grace-ms (1000: keep consuming after
 * the last expected key, to count duplicates or unwanted tags), --access-key/--secret-key (see {@link Main}).
 * Result: {@link Tracker#report} (expected, received, distinct, duplicates, missing, missing_keys,
 * missing_by_mode, unexpected, tags, queues, first_message_ms, ...) plus complete and elapsed_ms.
 */
final class ConsumeScenarios {
    /** RequestCode.PULL_MESSAGE. */
    private static final int PULL_MESSAGE = 11;

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
        DefaultMQPushConsumer c = pushConsumer(a, group, null, m.topic, expr, tracker);
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

    /**
     * "tagskip": nothing the consumer is subscribed to is in the queue, so every pull only skips.
     * Its RPC hook prints "PROGRESS first_pull_ms=EPOCH_MS" when the first PULL_MESSAGE goes out, so
     * the test can time how soon the broker's committed offsets reach the queues' ends.  At a line
     * on stdin it runs mqadmin consumerProgress -g GROUP while still connected, then shuts down.
     * Result: group, topic, first_pull_ms, deliveries (must be 0), consumer_progress (the command).
     */
    static Map<String, Object> tagSkip(Main.Args a) throws Exception {
        Manifest m = Manifest.read(a.get("manifest"));
        String group = a.get("group");
        AtomicLong firstPull = new AtomicLong();
        RPCHook hook = new RPCHook() {
            @Override
            public void doBeforeRequest(String remoteAddr, RemotingCommand request) {
                if (request.getCode() == PULL_MESSAGE && firstPull.compareAndSet(0, System.currentTimeMillis())) {
                    Main.progress("PROGRESS first_pull_ms=" + firstPull.get());
                }
            }

            @Override
            public void doAfterResponse(String remoteAddr, RemotingCommand request, RemotingCommand response) {
            }
        };
        Tracker tracker = new Tracker(null);
        DefaultMQPushConsumer c = pushConsumer(a, group, hook, m.topic, a.get("expression", "TagA"), tracker);
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("group", group);
        r.put("topic", m.topic);
        try {
            c.start();
            Main.progress("# push consumer " + group + " started");
            Main.awaitStop();
            r.put("consumer_progress", AdminScenario.command(a.namesrv(), "consumerProgress", "-g", group));
        } finally {
            c.shutdown();
        }
        r.put("first_pull_ms", firstPull.get());
        r.put("deliveries", tracker.deliveries());
        return r;
    }

    /** A push consumer recording every delivery in {@code tracker}; --from picks where a new group starts. */
    private static DefaultMQPushConsumer pushConsumer(Main.Args a, String group, RPCHook hook, String topic,
        String expr, Tracker tracker) throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group, Main.withAcl(hook), new AllocateMessageQueueAveragely());
        c.setNamesrvAddr(a.namesrv());
        String from = a.get("from", "first");
        switch (from) {
            case "first":
                c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
                break;
            case "last":
                c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET);
                break;
            default:
                throw new IllegalArgumentException("--from must be first or last, not " + from);
        }
        c.subscribe(topic, expr);
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            tracker.recordAll(msgs);
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        return c;
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
        DefaultLitePullConsumer c = new DefaultLitePullConsumer(group, Main.aclHook());
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
