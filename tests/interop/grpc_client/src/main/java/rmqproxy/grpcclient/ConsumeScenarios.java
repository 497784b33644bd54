package rmqproxy.grpcclient;

import java.time.Duration;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.MessageView;

/**
 * The consuming scenarios: simple-consume, push-consume and receive-empty.
 *
 * <p>All subscribe consumer group {@code --group} to {@code --topic} with filter {@code --tag} (default
 * "*"; {@code --filter-type sql} makes it a SQL92 expression instead), and put "startup_ms" (the
 * consumer's build(): settings, route, and for push the first assignments) in the RESULT.
 */
final class ConsumeScenarios {
    private ConsumeScenarios() {
    }

    private static Map<String, FilterExpression> subscription(Main.Args a) {
        String expression = a.get("tag", "*");
        FilterExpressionType type = "sql".equalsIgnoreCase(a.get("filter-type", "tag"))
            ? FilterExpressionType.SQL92 : FilterExpressionType.TAG;
        return Collections.singletonMap(a.require("topic"), new FilterExpression(expression, type));
    }

    private static SimpleConsumer simpleConsumer(Main.Args a, Main.Result result, long awaitMs) throws Exception {
        result.put("topic", a.require("topic"));
        result.put("group", a.require("group"));
        long t0 = System.currentTimeMillis();
        SimpleConsumer consumer = ClientServiceProvider.loadService().newSimpleConsumerBuilder()
            .setClientConfiguration(Main.clientConfiguration(a))
            .setConsumerGroup(a.require("group"))
            .setAwaitDuration(Duration.ofMillis(awaitMs))
            .setSubscriptionExpressions(subscription(a))
            .build();
        result.put("startup_ms", System.currentTimeMillis() - t0);
        return consumer;
    }

    /**
     * simple-consume: receive ({@code --max} per call, default 16; invisible duration {@code --invisible-ms},
     * default 15000; long-polling {@code --await-ms}, default 5000) until {@code --count} messages (default 10)
     * have been acked, or nothing has arrived for {@code --idle-ms} (default 20000).
     *
     * <p>Each delivery is acked, except: {@code --nack-first true} leaves a message's first delivery (in this
     * run) unacked, so it comes back when its invisible time ends; {@code --change-invisible-ms X} calls
     * changeInvisibleDuration(X) on the first delivery instead; {@code --never-ack true} acks nothing (the
     * retry/DLQ path), and then {@code --count} counts deliveries.  {@code --ack-delay-ms} waits before
     * each ack.
     *
     * <p>RESULT: "messages": one object per delivery (Views.describe, plus "action": ack, none or
     * change_invisible, with "ack_ms"/"change_ms" or "action_error"/"code"); "receives": one per receive
     * call {started_ms, returned_ms, elapsed_ms, n} or with "error"/"code"; "acked", "deliveries",
     * "distinct".
     */
    static void simpleConsume(Main.Args a, Main.Result result) throws Exception {
        final int count = a.intOpt("count", 10);
        final int max = a.intOpt("max", 16);
        final long awaitMs = a.longOpt("await-ms", 5000);
        final Duration invisible = Duration.ofMillis(a.longOpt("invisible-ms", 15_000));
        final long idleMs = a.longOpt("idle-ms", 20_000);
        final long ackDelayMs = a.longOpt("ack-delay-ms", 0);
        final boolean nackFirst = a.bool("nack-first", false);
        final boolean neverAck = a.bool("never-ack", false);
        final long changeMs = a.longOpt("change-invisible-ms", -1);
        final SimpleConsumer consumer = simpleConsumer(a, result, awaitMs);
        final List<Object> messages = result.list("messages");
        final List<Object> receives = result.list("receives");
        final Set<String> seen = ConcurrentHashMap.newKeySet();
        int acked = 0;
        int deliveries = 0;
        long lastActivity = System.currentTimeMillis();
        while (System.currentTimeMillis() < a.softDeadline()) {
            if (neverAck ? deliveries >= count : acked >= count) {
                break;
            }
            if (System.currentTimeMillis() - lastActivity >= idleMs) {
                result.put("stopped_idle", true);
                break;
            }
            Map<String, Object> call = new LinkedHashMap<>();
            long started = System.currentTimeMillis();
            call.put("started_ms", started);
            List<MessageView> views;
            try {
                views = consumer.receive(max, invisible);
            } catch (Exception e) {
                long now = System.currentTimeMillis();
                call.put("returned_ms", now);
                call.put("elapsed_ms", now - started);
                call.put("n", 0);
                call.putAll(Main.error(e));
                receives.add(call);
                Main.pause(200);
                continue;
            }
            long received = System.currentTimeMillis();
            call.put("returned_ms", received);
            call.put("elapsed_ms", received - started);
            call.put("n", views.size());
            receives.add(call);
            if (!views.isEmpty()) {
                lastActivity = received;
            }
            for (MessageView view : views) {
                deliveries++;
                Map<String, Object> rec = Views.describe(view, received);
                boolean first = seen.add(view.getMessageId().toString());
                try {
                    if (neverAck || (first && nackFirst)) {
                        rec.put("action", "none");
                    } else if (first && changeMs >= 0) {
                        rec.put("action", "change_invisible");
                        rec.put("change_invisible_ms", changeMs);
                        consumer.changeInvisibleDuration(view, Duration.ofMillis(changeMs));
                        rec.put("change_ms", System.currentTimeMillis());
                    } else {
                        rec.put("action", "ack");
                        if (ackDelayMs > 0) {
                            Main.pause(ackDelayMs);
                        }
                        consumer.ack(view);
                        rec.put("ack_ms", System.currentTimeMillis());
                        acked++;
                    }
                } catch (Exception e) {
                    Map<String, Object> err = Main.error(e);
                    rec.put("action_error", err.get("error"));
                    if (err.containsKey("code")) {
                        rec.put("code", err.get("code"));
                    }
                }
                messages.add(rec);
            }
        }
        result.put("acked", acked);
        result.put("deliveries", deliveries);
        result.put("distinct", seen.size());
        Main.closeBounded(consumer, 5000, result);
    }

    /**
     * push-consume: a PushConsumer whose listener records each delivery (Views.describe plus "thread",
     * "result") and returns SUCCESS, or FAILURE on a message's first delivery with {@code --fail-first true};
     * {@code --consume-ms} sleeps in the listener first.  Runs until {@code --count} messages (default 10)
     * were consumed with SUCCESS, or nothing was delivered for {@code --idle-ms} (default 20000).
     * {@code --threads} is the consumption thread count and {@code --max-cache} the cached message count
     * (client defaults 20 and 1024).
     *
     * <p>RESULT: "consumed" in the order the listener was called, "succeeded", "deliveries", "distinct".
     */
    static void pushConsume(Main.Args a, Main.Result result) throws Exception {
        final int count = a.intOpt("count", 10);
        final long idleMs = a.longOpt("idle-ms", 20_000);
        final long consumeMs = a.longOpt("consume-ms", 0);
        final boolean failFirst = a.bool("fail-first", false);
        final List<Object> consumed = result.list("consumed");
        final Set<String> seen = ConcurrentHashMap.newKeySet();
        final AtomicInteger succeeded = new AtomicInteger();
        final AtomicInteger deliveries = new AtomicInteger();
        final AtomicLong lastActivity = new AtomicLong(System.currentTimeMillis());
        result.put("topic", a.require("topic"));
        result.put("group", a.require("group"));
        long t0 = System.currentTimeMillis();
        PushConsumer consumer = null;
        try {
            var builder = ClientServiceProvider.loadService().newPushConsumerBuilder()
                .setClientConfiguration(Main.clientConfiguration(a))
                .setConsumerGroup(a.require("group"))
                .setSubscriptionExpressions(subscription(a))
                .setMessageListener(view -> {
                    long now = System.currentTimeMillis();
                    lastActivity.set(now);
                    deliveries.incrementAndGet();
                    Map<String, Object> rec = Views.describe(view, now);
                    rec.put("thread", Thread.currentThread().getName());
                    if (consumeMs > 0) {
                        Main.pause(consumeMs);
                    }
                    boolean first = seen.add(view.getMessageId().toString());
                    ConsumeResult answer = failFirst && first ? ConsumeResult.FAILURE : ConsumeResult.SUCCESS;
                    rec.put("result", answer.name());
                    rec.put("returned_ms", System.currentTimeMillis());
                    consumed.add(rec);
                    if (answer == ConsumeResult.SUCCESS) {
                        succeeded.incrementAndGet();
                    }
                    return answer;
                });
            if (a.get("threads") != null) {
                builder.setConsumptionThreadCount(a.intOpt("threads", 20));
            }
            if (a.get("max-cache") != null) {
                builder.setMaxCacheMessageCount(a.intOpt("max-cache", 1024));
            }
            consumer = builder.build();
            result.put("startup_ms", System.currentTimeMillis() - t0);
            lastActivity.set(Math.max(lastActivity.get(), System.currentTimeMillis()));
            while (succeeded.get() < count && System.currentTimeMillis() < a.softDeadline()) {
                if (System.currentTimeMillis() - lastActivity.get() >= idleMs) {
                    result.put("stopped_idle", true);
                    break;
                }
                Main.pause(50);
            }
        } finally {
            result.put("succeeded", succeeded.get());
            result.put("deliveries", deliveries.get());
            result.put("distinct", seen.size());
        }
        Main.closeBounded(consumer, 5000, result);
    }

    /**
     * receive-empty: one SimpleConsumer ({@code --await-ms}, default 5000) receives {@code --repeat} times
     * (default 1) from a topic expected to be empty.  RESULT "receives": {started_ms, returned_ms,
     * elapsed_ms, n} or with "error"/"code" (a message that does arrive is acked and counted in n).
     */
    static void receiveEmpty(Main.Args a, Main.Result result) throws Exception {
        final long awaitMs = a.longOpt("await-ms", 5000);
        final int repeat = a.intOpt("repeat", 1);
        final Duration invisible = Duration.ofMillis(a.longOpt("invisible-ms", 15_000));
        final SimpleConsumer consumer = simpleConsumer(a, result, awaitMs);
        result.put("await_ms", awaitMs);
        final List<Object> receives = result.list("receives");
        for (int i = 0; i < repeat && System.currentTimeMillis() < a.softDeadline(); i++) {
            Map<String, Object> call = new LinkedHashMap<>();
            long started = System.currentTimeMillis();
            call.put("started_ms", started);
            try {
                List<MessageView> views = consumer.receive(a.intOpt("max", 16), invisible);
                long now = System.currentTimeMillis();
                call.put("returned_ms", now);
                call.put("elapsed_ms", now - started);
                call.put("n", views.size());
                for (MessageView view : views) {
                    consumer.ack(view);
                }
            } catch (Exception e) {
                long now = System.currentTimeMillis();
                call.put("returned_ms", now);
                call.put("elapsed_ms", now - started);
                call.put("n", 0);
                call.putAll(Main.error(e));
            }
            receives.add(call);
        }
        Main.closeBounded(consumer, 5000, result);
    }
}
