package rmqproxy.grpcclient;

import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.ProducerBuilder;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;
import org.apache.rocketmq.client.java.impl.producer.SendReceiptImpl;

/**
 * send: one Producer sends {@code --count} messages (default 10) to {@code --topic}, one at a time.
 *
 * <p>Message i has tag {@code --tag} (default "TagA"), key "k&lt;i&gt;" and body "&lt;topic&gt;-&lt;i&gt;";
 * {@code --kind} adds what the topic's type needs:
 * <ul>
 * <li>normal (default): nothing more;</li>
 * <li>fifo: message group "g&lt;i % --groups&gt;" ({@code --groups} default 4);</li>
 * <li>delay: delivery timestamp now + {@code --delay-ms} (default 5000), also written as "deliver_at_ms";</li>
 * <li>transaction: sent in a transaction that is then ended as {@code --decisions} (default
 * "commit,rollback,unknown") says for i mod its length: "commit", "rollback", or "unknown" (left open, so
 * the server asks the producer's TransactionChecker, which answers COMMIT for those and, if asked about
 * any other, what was decided).  Every check is recorded under "checks" {i, message_id, checked_ms,
 * answer}; after the sends the producer stays up until every "unknown" message has been asked about (or
 * {@code --check-wait-ms}, default 60000, passes).</li>
 * </ul>
 *
 * <p>RESULT: "startup_ms" (Producer build(): settings and topic route), "sent": one object per message
 * {i, message_id, sent_ms (when send returned), elapsed_ms, queue {broker, queue_id}, offset,
 * transaction_id, decision, end_error} or {i, error, code, sent_ms}; "sent_ok", "send_errors".
 * {@code --interval-ms} (default 0) waits between sends; {@code --max-attempts} is the producer's
 * send attempts (client default 3).
 */
final class SendScenario {
    private SendScenario() {
    }

    static void run(Main.Args a, Main.Result result) throws Exception {
        final String topic = a.require("topic");
        final String kind = a.get("kind", "normal");
        final int count = a.intOpt("count", 10);
        final int groups = a.intOpt("groups", 4);
        final String tag = a.get("tag", "TagA");
        final long delayMs = a.longOpt("delay-ms", 5000);
        final long intervalMs = a.longOpt("interval-ms", 0);
        final String[] decisions = a.get("decisions", "commit,rollback,unknown").split(",");
        if (!List.of("normal", "fifo", "delay", "transaction").contains(kind)) {
            throw new IllegalArgumentException("--kind is normal, fifo, delay or transaction, not " + kind);
        }
        result.put("topic", topic);
        result.put("kind", kind);
        final boolean tx = "transaction".equals(kind);
        final Map<String, String> decisionById = new ConcurrentHashMap<>();
        final Set<Integer> unknownChecked = ConcurrentHashMap.newKeySet();
        final List<Object> checks = tx ? result.list("checks") : null;

        final ClientServiceProvider provider = ClientServiceProvider.loadService();
        ProducerBuilder builder = provider.newProducerBuilder()
            .setClientConfiguration(Main.clientConfiguration(a))
            .setTopics(topic);
        if (a.get("max-attempts") != null) {
            builder.setMaxAttempts(a.intOpt("max-attempts", 3));
        }
        if (tx) {
            builder.setTransactionChecker((MessageView view) -> {
                int i = indexOf(view);
                String decided = decisionById.getOrDefault(view.getMessageId().toString(),
                    i >= 0 ? decisions[i % decisions.length] : "unknown");
                TransactionResolution answer = "rollback".equals(decided)
                    ? TransactionResolution.ROLLBACK : TransactionResolution.COMMIT;
                Map<String, Object> check = new LinkedHashMap<>();
                check.put("i", i);
                check.put("message_id", view.getMessageId().toString());
                check.put("checked_ms", System.currentTimeMillis());
                check.put("decision", decided);
                check.put("answer", answer.name());
                checks.add(check);
                if ("unknown".equals(decided)) {
                    unknownChecked.add(i);
                }
                return answer;
            });
        }
        long t0 = System.currentTimeMillis();
        final Producer producer = builder.build();
        result.put("startup_ms", System.currentTimeMillis() - t0);

        final List<Object> sent = result.list("sent");
        int ok = 0;
        int unknowns = 0;
        for (int i = 0; i < count && System.currentTimeMillis() < a.softDeadline(); i++) {
            MessageBuilder mb = provider.newMessageBuilder()
                .setTopic(topic)
                .setTag(tag)
                .setKeys("k" + i)
                .setBody((topic + "-" + i).getBytes(StandardCharsets.UTF_8));
            Map<String, Object> rec = new LinkedHashMap<>();
            rec.put("i", i);
            if ("fifo".equals(kind)) {
                String group = "g" + (i % groups);
                mb.setMessageGroup(group);
                rec.put("message_group", group);
            } else if ("delay".equals(kind)) {
                long at = System.currentTimeMillis() + delayMs;
                mb.setDeliveryTimestamp(at);
                rec.put("deliver_at_ms", at);
            }
            Message message = mb.build();
            long start = System.currentTimeMillis();
            try {
                SendReceipt receipt;
                Transaction transaction = null;
                if (tx) {
                    transaction = producer.beginTransaction();
                    receipt = producer.send(message, transaction);
                } else {
                    receipt = producer.send(message);
                }
                long now = System.currentTimeMillis();
                rec.put("message_id", receipt.getMessageId().toString());
                rec.put("sent_ms", now);
                rec.put("elapsed_ms", now - start);
                if (receipt instanceof SendReceiptImpl) {
                    SendReceiptImpl impl = (SendReceiptImpl) receipt;
                    Map<String, Object> q = new LinkedHashMap<>();
                    q.put("broker", impl.getMessageQueue().getBroker().getName());
                    q.put("queue_id", impl.getMessageQueue().getQueueId());
                    rec.put("queue", q);
                    rec.put("offset", impl.getOffset());
                    if (tx) {
                        rec.put("transaction_id", impl.getTransactionId());
                    }
                }
                ok++;
                if (tx) {
                    String decision = decisions[i % decisions.length];
                    decisionById.put(receipt.getMessageId().toString(), decision);
                    rec.put("decision", decision);
                    try {
                        if ("commit".equals(decision)) {
                            transaction.commit();
                        } else if ("rollback".equals(decision)) {
                            transaction.rollback();
                        } else {
                            unknowns++;
                        }
                        rec.put("ended_ms", System.currentTimeMillis());
                    } catch (Exception e) {
                        rec.put("end_error", Main.error(e).get("error"));
                    }
                }
            } catch (Exception e) {
                rec.put("sent_ms", System.currentTimeMillis());
                rec.put("elapsed_ms", System.currentTimeMillis() - start);
                rec.putAll(Main.error(e));
            }
            sent.add(rec);
            if (intervalMs > 0) {
                Main.pause(intervalMs);
            }
        }
        result.put("sent_ok", ok);
        result.put("send_errors", sent.size() - ok);
        if (tx && unknowns > 0) {
            long until = Math.min(a.softDeadline(), System.currentTimeMillis() + a.longOpt("check-wait-ms", 60_000));
            while (unknownChecked.size() < unknowns && System.currentTimeMillis() < until) {
                Main.pause(100);
            }
            result.put("unknown_checked", unknownChecked.size());
            result.put("unknown_sent", unknowns);
        }
        Main.closeBounded(producer, 5000, result);
    }

    /** i of a message this scenario sent (from its key "k&lt;i&gt;"), or -1. */
    private static int indexOf(MessageView view) {
        for (String key : view.getKeys()) {
            if (key.startsWith("k")) {
                try {
                    return Integer.parseInt(key.substring(1));
                } catch (NumberFormatException e) {
                    return -1;
                }
            }
        }
        return -1;
    }
}
