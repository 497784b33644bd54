// Traffic that gives every dashboard panel and alert rule something to show (run as a
// single-file source program by tests/metrics/test_prometheus.py). Runs until stdin closes.
//
//   <p>Slow     1 msg/s, push consumer <p>-push: its pulls are held ~4 s per queue, woken by arrival
//   <p>Busy     50 msg/s, push consumer <p>-busy pulling every 100 ms, so most pulls find messages
//               (not held); every tenth message is answered RECONSUME_LATER once (retry traffic)
//   <p>Idle     no traffic after one warm-up message; a pull consumer <p>-pull asks with a 2 s
//               suspend time, so its holds end by timeout every 2 s (overshoot, wake=timeout)
//   <p>Orderly  10 msg/s by order id; orderly consumers of <p>-orderly: o1, o2 joins at 3 s, o1
//               leaves at 9 s, o3 joins at 12 s, so queue locks change hands (handoffs)
//
// Prints "PHASE <name>" as the schedule advances and "RESULT {...}" with counts on exit.
import java.io.InputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.MessageQueueSelector;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

public class MetricsTraffic {
    static final AtomicBoolean running = new AtomicBoolean(true);
    static final AtomicLong sent = new AtomicLong();
    static final AtomicLong consumed = new AtomicLong();
    static final AtomicLong retried = new AtomicLong();
    static final AtomicLong orderly = new AtomicLong();
    static final AtomicLong idlePulls = new AtomicLong();
    static final List<Throwable> errors = new ArrayList<>();

    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String p = args[1];
        String slow = p + "Slow", busy = p + "Busy", idle = p + "Idle", ordered = p + "Orderly";

        DefaultMQProducer producer = new DefaultMQProducer(p + "-producer");
        producer.setNamesrvAddr(namesrv);
        producer.start();
        for (String topic : new String[] {slow, busy, idle, ordered}) {
            producer.send(new Message(topic, "warmup", "warmup".getBytes())); // creates the topic
        }

        DefaultMQPushConsumer push = new DefaultMQPushConsumer(p + "-push");
        push.setNamesrvAddr(namesrv);
        push.setInstanceName(p + "-push");
        push.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        push.subscribe(slow, "*");
        push.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            consumed.addAndGet(msgs.size());
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        push.start();

        DefaultMQPushConsumer busyConsumer = new DefaultMQPushConsumer(p + "-busy");
        busyConsumer.setNamesrvAddr(namesrv);
        busyConsumer.setInstanceName(p + "-busy");
        busyConsumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        busyConsumer.setPullInterval(100); // messages gather between pulls: most pulls are not held
        busyConsumer.subscribe(busy, "*");
        busyConsumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt m : msgs) {
                String key = m.getKeys();
                if (m.getReconsumeTimes() == 0 && key != null && key.endsWith("0")) {
                    retried.incrementAndGet();
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                }
            }
            consumed.addAndGet(msgs.size());
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        busyConsumer.start();

        DefaultMQPullConsumer pull = new DefaultMQPullConsumer(p + "-pull");
        pull.setNamesrvAddr(namesrv);
        pull.setInstanceName(p + "-pull");
        pull.setRegisterTopics(Set.of(idle));
        pull.setBrokerSuspendMaxTimeMillis(2000);
        pull.setConsumerTimeoutMillisWhenSuspend(6000);
        pull.start();
        List<Thread> threads = new ArrayList<>();
        for (MessageQueue mq : pull.fetchSubscribeMessageQueues(idle)) {
            threads.add(loop("pull-" + mq.getQueueId(), () -> {
                long offset = pull.maxOffset(mq);
                while (running.get()) {
                    PullResult result = pull.pullBlockIfNotFound(mq, "*", offset, 32);
                    offset = result.getNextBeginOffset();
                    idlePulls.incrementAndGet();
                }
            }));
        }

        List<DefaultMQPushConsumer> orderlyConsumers = new ArrayList<>();
        DefaultMQPushConsumer o1 = orderlyConsumer(namesrv, p, "o1", ordered);
        orderlyConsumers.add(o1);

        threads.add(loop("slow", () -> {
            for (int i = 0; running.get(); i++) {
                producer.send(new Message(slow, "TagA", "s" + i, ("slow " + i).getBytes()));
                sent.incrementAndGet();
                Thread.sleep(1000);
            }
        }));
        threads.add(loop("busy", () -> {
            for (int i = 0; running.get(); i++) {
                producer.send(new Message(busy, "TagB", "b" + i, ("busy " + i).getBytes()));
                sent.incrementAndGet();
                Thread.sleep(20);
            }
        }));
        MessageQueueSelector byOrder = (mqs, msg, arg) -> mqs.get((Integer) arg % mqs.size());
        threads.add(loop("orderly", () -> {
            for (int i = 0; running.get(); i++) {
                producer.send(new Message(ordered, "TagO", "o" + i, ("order " + i).getBytes()), byOrder, i % 8);
                sent.incrementAndGet();
                Thread.sleep(100);
            }
        }));
        threads.add(loop("churn", () -> {
            Thread.sleep(3000);
            orderlyConsumers.add(orderlyConsumer(namesrv, p, "o2", ordered));
            System.out.println("PHASE o2-joined");
            Thread.sleep(6000);
            o1.shutdown();
            System.out.println("PHASE o1-left");
            Thread.sleep(3000);
            orderlyConsumers.add(orderlyConsumer(namesrv, p, "o3", ordered));
            System.out.println("PHASE o3-joined");
        }));
        System.out.println("PHASE started");

        InputStream in = System.in;
        while (in.read() != -1) {
            // run until the test closes stdin
        }
        running.set(false);
        for (Thread t : threads) {
            t.join(10_000);
        }
        for (DefaultMQPushConsumer c : orderlyConsumers) {
            c.shutdown();
        }
        pull.shutdown();
        busyConsumer.shutdown();
        push.shutdown();
        producer.shutdown();
        System.out.println("RESULT {\"sent\":" + sent + ",\"consumed\":" + consumed + ",\"retried\":" + retried
                + ",\"orderly\":" + orderly + ",\"idle_pulls\":" + idlePulls + ",\"errors\":" + errors.size() + "}");
        synchronized (errors) {
            for (Throwable e : errors) {
                e.printStackTrace();
            }
        }
        System.exit(errors.isEmpty() ? 0 : 1);
    }

    interface Body {
        void run() throws Exception;
    }

    static Thread loop(String name, Body body) {
        Thread t = new Thread(() -> {
            try {
                body.run();
            } catch (Throwable e) {
                if (running.get()) {
                    synchronized (errors) {
                        errors.add(e);
                    }
                }
            }
        }, name);
        t.setDaemon(true);
        t.start();
        return t;
    }

    static DefaultMQPushConsumer orderlyConsumer(String namesrv, String p, String name, String topic) throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(p + "-orderly");
        c.setNamesrvAddr(namesrv);
        c.setInstanceName(p + "-" + name);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerOrderly) (msgs, context) -> {
            orderly.addAndGet(msgs.size());
            return ConsumeOrderlyStatus.SUCCESS;
        });
        c.start();
        return c;
    }
}
