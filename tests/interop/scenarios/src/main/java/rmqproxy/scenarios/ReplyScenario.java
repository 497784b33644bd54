package rmqproxy.scenarios;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Scenario "reply": a responder (push consumer of --topic, plus a producer) answers every request
 * with MessageUtil.createReplyMessage, body "re:" + the request's body; a requester sends one
 * warm-up request (--warmup-timeout-ms 45000), then --count (5) requests with
 * DefaultMQProducer.request(msg, --timeout-ms 5000), one after another.
 *
 * <p>Result: replies (the bodies received, in order), failures (request exceptions),
 * reply_topics (the topics the replies came on), warmup_ms and warmup_failure (null when answered).
 */
final class ReplyScenario {
    private ReplyScenario() {
    }

    static Map<String, Object> run(Main.Args a) throws Exception {
        String topic = a.get("topic");
        String group = a.get("group");
        int count = a.getInt("count", 5);
        long timeoutMs = a.getLong("timeout-ms", 5000);

        DefaultMQProducer requester = new DefaultMQProducer(group + "-requester");
        requester.setNamesrvAddr(a.namesrv());
        requester.start();
        Main.setupSend(requester, new Message(topic, "Setup", "setup".getBytes(StandardCharsets.UTF_8)));

        DefaultMQProducer replier = new DefaultMQProducer(group + "-replier");
        replier.setNamesrvAddr(a.namesrv());
        replier.start();
        DefaultMQPushConsumer responder = new DefaultMQPushConsumer(group);
        responder.setNamesrvAddr(a.namesrv());
        responder.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET);
        responder.subscribe(topic, "Request");
        responder.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                try {
                    byte[] body = ("re:" + new String(m.getBody(), StandardCharsets.UTF_8)).getBytes(StandardCharsets.UTF_8);
                    replier.send(MessageUtil.createReplyMessage(m, body));
                } catch (Exception e) {
                    Main.progress("reply failed: " + Main.describe(e));
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        responder.start();
        Main.sleep(3000);  // the responder owns its queues before the first request
        // One warm-up request, given long enough for a client that skipped the heartbeat carrying its
        // new subVersion: the reference refuses the responder's pulls until the next one, 30 s on.
        long warmupStart = System.currentTimeMillis();
        String warmupFailure = null;
        try {
            requester.request(new Message(topic, "Request", "warmup".getBytes(StandardCharsets.UTF_8)),
                a.getLong("warmup-timeout-ms", 45000));
        } catch (Exception e) {
            warmupFailure = Main.describe(e);
        }
        long warmupMs = System.currentTimeMillis() - warmupStart;

        List<String> replies = new ArrayList<>();
        List<String> topics = new ArrayList<>();
        List<String> failures = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            try {
                Message reply = requester.request(new Message(topic, "Request", ("q" + i).getBytes(StandardCharsets.UTF_8)), timeoutMs);
                replies.add(new String(reply.getBody(), StandardCharsets.UTF_8));
                topics.add(reply.getTopic());
            } catch (Exception e) {
                failures.add(Main.describe(e));
            }
        }
        responder.shutdown();
        replier.shutdown();
        requester.shutdown();
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("replies", replies);
        r.put("reply_topics", topics);
        r.put("failures", failures);
        r.put("warmup_ms", warmupMs);
        r.put("warmup_failure", warmupFailure);
        return r;
    }
}
