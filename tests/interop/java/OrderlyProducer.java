// Producer for the issue 8 scenarios (tests/interop/orderly.py runs it): creates TOPIC with QUEUES
// queues on every master the route of TBW102 names (UPDATE_AND_CREATE_TOPIC through the client's
// admin API), waits until the route shows them (QUEUES x BROKERS queues on BROKERS brokers), prints
//   READY <broker>/<queue_id> ...
// (the topic's queues in the selector's order) and waits for "go" on stdin. Then it sends TOTAL
// messages with sync sends and a MessageQueueSelector: the queues sorted by (broker name, queue id),
// order id % queue count picks one (on one broker: queue id = order id % queue count); message i
// carries user properties order = i % ORDERS and seq = i / ORDERS, so each order id's seqs are sent
// in order.
//
// RATE > 0: one thread paced at RATE msgs/s; TOTAL <= 0 means "until stop". RATE = 0: THREADS
// threads as fast as sync sends go, thread t sending the order ids with id % THREADS == t (one
// order id is only ever sent by one thread, one message at a time, so its order holds).
// A failed send is retried (same message) until it is SEND_OK, so nothing is skipped; a retry after
// a timeout may store a duplicate, which consumers see as a repeated seq.
//
// "stop" (or EOF) on stdin ends sending early. Prints SENT <n> every 10,000 messages and finally
//   RESULT {"sent":N,"retries":R,"elapsed_ms":MS,"send_rate":MSGS_PER_S}
//
// Args: NAMESRV TOPIC QUEUES ORDERS TOTAL RATE THREADS [BROKERS]   (BROKERS: 1 unless given)
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.MessageQueueSelector;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;

public class OrderlyProducer {
    static final AtomicBoolean stop = new AtomicBoolean();
    static final AtomicLong sent = new AtomicLong();
    static final AtomicLong retries = new AtomicLong();

    static final Comparator<MessageQueue> BY_BROKER_AND_ID =
        Comparator.comparing(MessageQueue::getBrokerName).thenComparingInt(MessageQueue::getQueueId);

    static List<MessageQueue> sorted(List<MessageQueue> mqs) {
        List<MessageQueue> out = new ArrayList<>(mqs);
        out.sort(BY_BROKER_AND_ID);
        return out;
    }

    static final MessageQueueSelector BY_ORDER_ID = (mqs, msg, arg) -> {
        int orderId = (Integer) arg;
        return sorted(mqs).get(orderId % mqs.size());
    };

    static void sendOne(DefaultMQProducer producer, String topic, int orders, long i) throws InterruptedException {
        int orderId = (int) (i % orders);
        long seq = i / orders;
        Message msg = new Message(topic, "TagA", "o" + orderId + "-" + seq, (orderId + ":" + seq).getBytes(StandardCharsets.UTF_8));
        msg.putUserProperty("order", String.valueOf(orderId));
        msg.putUserProperty("seq", String.valueOf(seq));
        while (true) {
            try {
                SendResult result = producer.send(msg, BY_ORDER_ID, orderId);
                if (result.getSendStatus() == SendStatus.SEND_OK) {
                    long n = sent.incrementAndGet();
                    if (n % 10_000 == 0) {
                        System.out.println("SENT " + n);
                        System.out.flush();
                    }
                    return;
                }
                System.err.println("send " + i + ": " + result.getSendStatus());
            } catch (Exception e) {
                System.err.println("send " + i + ": " + e);
            }
            retries.incrementAndGet();
            Thread.sleep(100);
        }
    }

    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        int queues = Integer.parseInt(args[2]);
        int orders = Integer.parseInt(args[3]);
        long total = Long.parseLong(args[4]);
        double rate = Double.parseDouble(args[5]);
        int threads = Integer.parseInt(args[6]);
        int brokers = args.length > 7 ? Integer.parseInt(args[7]) : 1;

        DefaultMQProducer producer = new DefaultMQProducer(topic + "-pg");
        producer.setNamesrvAddr(namesrv);
        producer.start();
        producer.getDefaultMQProducerImpl().getmQClientFactory().getMQAdminImpl().createTopic("TBW102", topic, queues);
        long deadline = System.currentTimeMillis() + 30_000;
        List<MessageQueue> route = new ArrayList<>();
        while (true) {
            try {
                route = sorted(producer.fetchPublishMessageQueues(topic));
                HashSet<String> names = new HashSet<>();
                route.forEach(mq -> names.add(mq.getBrokerName()));
                if (route.size() == queues * brokers && names.size() == brokers) {
                    break;
                }
            } catch (Exception e) {
                // route not there yet
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("topic " + topic + " never showed " + queues + " queues on each of "
                    + brokers + " broker(s): " + route);
            }
            Thread.sleep(100);
        }
        StringBuilder ready = new StringBuilder("READY");
        for (MessageQueue mq : route) {
            ready.append(' ').append(mq.getBrokerName()).append('/').append(mq.getQueueId());
        }
        System.out.println(ready);
        System.out.flush();

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String go = in.readLine();
        if (go == null || !go.trim().equals("go")) {
            producer.shutdown();
            return;
        }
        Thread stdin = new Thread(() -> {
            try {
                for (String line = in.readLine(); line != null && !line.trim().equals("stop"); line = in.readLine()) {
                    // ignored
                }
            } catch (Exception e) {
                // treat as EOF
            }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();

        long start = System.currentTimeMillis();
        List<Thread> workers = new ArrayList<>();
        if (rate > 0) {
            workers.add(new Thread(() -> {
                try {
                    long t0 = System.nanoTime();
                    for (long i = 0; (total <= 0 || i < total) && !stop.get(); i++) {
                        long due = t0 + (long) (i * 1e9 / rate);
                        long wait = due - System.nanoTime();
                        if (wait > 0) {
                            Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                        }
                        sendOne(producer, topic, orders, i);
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }));
        } else {
            for (int t = 0; t < threads; t++) {
                final int me = t;
                workers.add(new Thread(() -> {
                    try {
                        // order ids me, me + threads, ...; message i = seq * orders + orderId
                        for (long i = 0; i < total && !stop.get(); i++) {
                            if ((i % orders) % threads == me) {
                                sendOne(producer, topic, orders, i);
                            }
                        }
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }));
            }
        }
        workers.forEach(Thread::start);
        for (Thread w : workers) {
            w.join();
        }
        long elapsed = System.currentTimeMillis() - start;
        producer.shutdown();
        System.out.println("RESULT {\"sent\":" + sent.get() + ",\"retries\":" + retries.get() + ",\"elapsed_ms\":" + elapsed
            + ",\"send_rate\":" + Math.round(sent.get() * 1000.0 / Math.max(1, elapsed)) + "}");
        System.out.flush();
    }
}
