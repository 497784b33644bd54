package rmqproxy.scenarios;

import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/**
 * Scenario 1, "send": sync, async, oneway and batch sends of --count messages (default 10000, a
 * quarter each; batches of --batch-size) with keys "{key-prefix}-{i}" and tags taken in turn from
 * --tags (default "TagA,TagB,TagC": by i % 3).  Writes the manifest (--manifest) the consume
 * scenarios check against.
 *
 * <p>One set-up send to "{topic}-warmup" comes first (see {@link Main#setupSend}).
 * Options: --topic, --group (producer group), --count, --batch-size (50), --async-inflight
 * (128), --tags, --manifest (and --access-key/--secret-key, see {@link Main}).  Result: per mode the count, statuses (SendStatus name, EXCEPTION, ONEWAY
 * for unconfirmed oneway sends) and elapsed ms; failures (first 20, exception text); samples of
 * sync results (key, msgId, offsetMsgId, queueId, queueOffset) for mqadmin.
 */
final class SendScenario {
    /** The tags messages take in turn: set once from --tags before anything is sent. */
    private static String[] tags = {"TagA", "TagB", "TagC"};

    private SendScenario() {
    }

    static String tag(int i) {
        return tags[i % tags.length];
    }

    static Message message(String topic, String prefix, int i) {
        String key = prefix + "-" + i;
        byte[] body = ("scenario message " + key + " " + "x".repeat(64)).getBytes(StandardCharsets.UTF_8);
        return new Message(topic, tag(i), key, body);
    }

    static Map<String, Object> run(Main.Args a) throws Exception {
        String topic = a.get("topic");
        String group = a.get("group", topic + "-producer");
        String prefix = a.get("key-prefix", topic);
        int n = a.getInt("count", 10000);
        int batchSize = a.getInt("batch-size", 50);
        int inflight = a.getInt("async-inflight", 128);
        String manifest = a.get("manifest", null);
        tags = a.get("tags", String.join(",", tags)).split(",");

        DefaultMQProducer producer = new DefaultMQProducer(group, Main.aclHook());
        producer.setNamesrvAddr(a.namesrv());
        producer.start();
        // Warm up (classes, connections, auto-create path) on another topic, so that a cold JVM's
        // first send cannot hit the 3 s send timeout inside the counted sends.
        String warmup = Main.setupSend(producer, new Message(topic + "-warmup", "TagA", "warmup", new byte[] {1}))
            .getSendStatus().name();

        int quarter = n / 4;
        int[] bounds = {0, quarter, 2 * quarter, 3 * quarter, n};
        String[] modes = {"sync", "async", "oneway", "batch"};
        String[][] rows = new String[n][];
        List<String> failures = Collections.synchronizedList(new ArrayList<>());
        AtomicInteger failureCount = new AtomicInteger();
        Map<String, Object> byMode = new LinkedHashMap<>();
        List<Map<String, Object>> samples = new ArrayList<>();
        Map<String, Integer> queuesUsed = new ConcurrentHashMap<>();
        long t0 = System.currentTimeMillis();
        try {
            for (int m = 0; m < modes.length; m++) {
                String mode = modes[m];
                Map<String, AtomicInteger> statuses = new ConcurrentHashMap<>();
                long ms0 = System.currentTimeMillis();
                int from = bounds[m];
                int to = bounds[m + 1];
                Main.progress("# " + mode + " sends " + from + ".." + (to - 1));
                switch (mode) {
                    case "sync":
                        for (int i = from; i < to; i++) {
                            Message msg = message(topic, prefix, i);
                            try {
                                SendResult r = producer.send(msg);
                                count(statuses, r.getSendStatus().name());
                                rows[i] = row(msg, i, mode, r);
                                queuesUsed.merge(String.valueOf(r.getMessageQueue().getQueueId()), 1, Integer::sum);
                                if (samples.size() < 3) {
                                    samples.add(sample(msg, r));
                                }
                            } catch (Exception e) {
                                count(statuses, "EXCEPTION");
                                fail(failures, failureCount, mode, msg, e);
                                rows[i] = row(msg, i, mode, "EXCEPTION");
                            }
                        }
                        break;
                    case "async": {
                        Semaphore permits = new Semaphore(inflight);
                        CountDownLatch done = new CountDownLatch(to - from);
                        for (int i = from; i < to; i++) {
                            final int idx = i;
                            final Message msg = message(topic, prefix, i);
                            permits.acquire();
                            try {
                                producer.send(msg, new SendCallback() {
                                    @Override
                                    public void onSuccess(SendResult r) {
                                        count(statuses, r.getSendStatus().name());
                                        rows[idx] = row(msg, idx, mode, r);
                                        queuesUsed.merge(String.valueOf(r.getMessageQueue().getQueueId()), 1, Integer::sum);
                                        permits.release();
                                        done.countDown();
                                    }

                                    @Override
                                    public void onException(Throwable e) {
                                        count(statuses, "EXCEPTION");
                                        fail(failures, failureCount, mode, msg, e);
                                        rows[idx] = row(msg, idx, mode, "EXCEPTION");
                                        permits.release();
                                        done.countDown();
                                    }
                                });
                            } catch (Exception e) {
                                count(statuses, "EXCEPTION");
                                fail(failures, failureCount, mode, msg, e);
                                rows[idx] = row(msg, idx, mode, "EXCEPTION");
                                permits.release();
                                done.countDown();
                            }
                        }
                        if (!done.await(120, TimeUnit.SECONDS)) {
                            count(statuses, "NO_CALLBACK", (int) done.getCount());
                            failureCount.addAndGet((int) done.getCount());
                            failures.add("async: " + done.getCount() + " callbacks never came within 120 s");
                            for (int i = from; i < to; i++) {
                                if (rows[i] == null) {
                                    rows[i] = row(message(topic, prefix, i), i, mode, "NO_CALLBACK");
                                }
                            }
                        }
                        break;
                    }
                    case "oneway":
                        for (int i = from; i < to; i++) {
                            Message msg = message(topic, prefix, i);
                            try {
                                producer.sendOneway(msg);
                                count(statuses, "ONEWAY");
                                rows[i] = row(msg, i, mode, "ONEWAY");
                            } catch (Exception e) {
                                count(statuses, "EXCEPTION");
                                fail(failures, failureCount, mode, msg, e);
                                rows[i] = row(msg, i, mode, "EXCEPTION");
                            }
                        }
                        break;
                    default: // batch
                        for (int i = from; i < to; i += batchSize) {
                            List<Message> batch = new ArrayList<>();
                            for (int j = i; j < Math.min(to, i + batchSize); j++) {
                                batch.add(message(topic, prefix, j));
                            }
                            String status;
                            try {
                                SendResult r = producer.send(batch);
                                status = r.getSendStatus().name();
                                queuesUsed.merge(String.valueOf(r.getMessageQueue().getQueueId()), batch.size(), Integer::sum);
                                String[] ids = r.getMsgId() == null ? new String[0] : r.getMsgId().split(",");
                                if (ids.length != batch.size()) {
                                    failures.add("batch at " + i + ": " + batch.size() + " messages but " + ids.length
                                        + " msgIds in the SendResult: " + r.getMsgId());
                                    failureCount.incrementAndGet();
                                }
                            } catch (Exception e) {
                                status = "EXCEPTION";
                                fail(failures, failureCount, mode, batch.get(0), e);
                            }
                            count(statuses, status, batch.size());
                            for (int j = 0; j < batch.size(); j++) {
                                rows[i + j] = row(batch.get(j), i + j, mode, status);
                            }
                        }
                }
                Map<String, Object> mr = new LinkedHashMap<>();
                mr.put("count", to - from);
                Map<String, Integer> st = new TreeMap<>();
                statuses.forEach((k, v) -> st.put(k, v.get()));
                mr.put("statuses", st);
                mr.put("elapsed_ms", System.currentTimeMillis() - ms0);
                byMode.put(mode, mr);
                Main.progress("# " + mode + " done: " + st);
            }
        } finally {
            producer.shutdown();
        }
        if (manifest != null) {
            Manifest.write(Paths.get(manifest), topic, Arrays.asList(rows));
        }
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("topic", topic);
        r.put("group", group);
        r.put("total", n);
        r.put("warmup", warmup);
        r.put("modes", byMode);
        r.put("failure_count", failureCount.get());
        r.put("failures", new ArrayList<>(failures.subList(0, Math.min(20, failures.size()))));
        r.put("queues", new TreeMap<>(queuesUsed));
        r.put("samples", samples);
        r.put("elapsed_ms", System.currentTimeMillis() - t0);
        return r;
    }

    private static void count(Map<String, AtomicInteger> statuses, String status) {
        count(statuses, status, 1);
    }

    private static void count(Map<String, AtomicInteger> statuses, String status, int n) {
        statuses.computeIfAbsent(status, k -> new AtomicInteger()).addAndGet(n);
    }

    private static void fail(List<String> failures, AtomicInteger count, String mode, Message msg, Throwable e) {
        count.incrementAndGet();
        if (failures.size() < 20) {
            failures.add(mode + " " + msg.getKeys() + ": " + Main.describe(e));
        }
    }

    private static String[] row(Message msg, int i, String mode, SendResult r) {
        return new String[] {msg.getKeys(), tag(i), mode, r.getSendStatus().name(), String.valueOf(r.getMsgId()),
            String.valueOf(r.getOffsetMsgId()), String.valueOf(r.getMessageQueue().getQueueId()),
            String.valueOf(r.getQueueOffset())};
    }

    private static String[] row(Message msg, int i, String mode, String status) {
        return new String[] {msg.getKeys(), tag(i), mode, status, "", "", "", ""};
    }

    private static Map<String, Object> sample(Message msg, SendResult r) {
        Map<String, Object> s = new LinkedHashMap<>();
        s.put("key", msg.getKeys());
        s.put("tag", msg.getTags());
        s.put("msg_id", r.getMsgId());
        s.put("offset_msg_id", r.getOffsetMsgId());
        s.put("broker_name", r.getMessageQueue().getBrokerName());
        s.put("queue_id", r.getMessageQueue().getQueueId());
        s.put("queue_offset", r.getQueueOffset());
        return s;
    }
}
