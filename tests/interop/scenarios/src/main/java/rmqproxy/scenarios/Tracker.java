package rmqproxy.scenarios;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.LinkedHashMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.common.message.MessageExt;

/** Counts deliveries by message key, thread-safe; reports against an expected key set. */
final class Tracker {
    private final Map<String, String> expected;
    private final Map<String, AtomicInteger> seen = new ConcurrentHashMap<>();
    private final Map<String, AtomicInteger> tags = new ConcurrentHashMap<>();
    private final Map<Integer, AtomicInteger> queues = new ConcurrentHashMap<>();
    private final AtomicLong deliveries = new AtomicLong();
    private final AtomicInteger expectedDistinct = new AtomicInteger();
    private final long startMs = System.currentTimeMillis();
    private final AtomicLong firstMs = new AtomicLong();
    private final AtomicLong lastNewMs = new AtomicLong();

    /** {@code expected} maps key -> tag; null means "count everything, expect nothing in particular". */
    Tracker(Map<String, String> expected) {
        this.expected = expected;
    }

    void record(MessageExt m) {
        long now = System.currentTimeMillis();
        firstMs.compareAndSet(0, now);
        deliveries.incrementAndGet();
        String key = m.getKeys() == null ? "(no key)" : m.getKeys();
        AtomicInteger c = seen.computeIfAbsent(key, k -> new AtomicInteger());
        if (c.incrementAndGet() == 1) {
            lastNewMs.set(now);
            if (expected == null || expected.containsKey(key)) {
                expectedDistinct.incrementAndGet();
            }
        }
        tags.computeIfAbsent(String.valueOf(m.getTags()), k -> new AtomicInteger()).incrementAndGet();
        queues.computeIfAbsent(m.getQueueId(), k -> new AtomicInteger()).incrementAndGet();
    }

    void recordAll(Collection<MessageExt> msgs) {
        for (MessageExt m : msgs) {
            record(m);
        }
    }

    boolean complete() {
        return expected != null && expectedDistinct.get() >= expected.size();
    }

    int distinct() {
        return seen.size();
    }

    int expectedReceived() {
        return expectedDistinct.get();
    }

    long deliveries() {
        return deliveries.get();
    }

    boolean saw(String key) {
        return seen.containsKey(key);
    }

    /** Wait until complete() or the deadline; returns whether complete. */
    boolean await(long timeoutMs) {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (!complete() && System.currentTimeMillis() < deadline) {
            Main.sleep(20);
        }
        return complete();
    }

    Map<String, Object> report(Map<String, String> modesByKey) {
        Map<String, Object> r = new LinkedHashMap<>();
        int dup = 0;
        int dupKeys = 0;
        List<String> unexpected = new ArrayList<>();
        for (Map.Entry<String, AtomicInteger> e : seen.entrySet()) {
            int n = e.getValue().get();
            if (n > 1) {
                dup += n - 1;
                dupKeys++;
            }
            if (expected != null && !expected.containsKey(e.getKey())) {
                unexpected.add(e.getKey());
            }
        }
        List<String> missing = new ArrayList<>();
        Map<String, Integer> missingByMode = new TreeMap<>();
        if (expected != null) {
            for (String k : expected.keySet()) {
                if (!seen.containsKey(k)) {
                    missing.add(k);
                    if (modesByKey != null) {
                        missingByMode.merge(String.valueOf(modesByKey.get(k)), 1, Integer::sum);
                    }
                }
            }
        }
        r.put("expected", expected == null ? null : expected.size());
        r.put("received", deliveries.get());
        r.put("distinct", seen.size());
        r.put("duplicates", dup);
        r.put("duplicate_keys", dupKeys);
        r.put("missing", missing.size());
        r.put("missing_keys", missing.subList(0, Math.min(10, missing.size())));
        r.put("missing_by_mode", missingByMode);
        r.put("unexpected", unexpected.size());
        r.put("unexpected_keys", unexpected.subList(0, Math.min(10, unexpected.size())));
        Map<String, Integer> tagCounts = new TreeMap<>();
        tags.forEach((k, v) -> tagCounts.put(k, v.get()));
        r.put("tags", tagCounts);
        Map<String, Integer> queueCounts = new TreeMap<>();
        queues.forEach((k, v) -> queueCounts.put(String.valueOf(k), v.get()));
        r.put("queues", queueCounts);
        r.put("first_message_ms", firstMs.get() == 0 ? null : firstMs.get() - startMs);
        r.put("last_new_message_ms", lastNewMs.get() == 0 ? null : lastNewMs.get() - startMs);
        return r;
    }
}
