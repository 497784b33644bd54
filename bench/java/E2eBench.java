// Load generator for bench/e2e.py (run as a single-file source program with rocketmq-client on
// the classpath). "send": THREADS threads of sync 1 KiB sends, TOTAL messages, reporting msgs/s
// and latency percentiles. "drain": a push consumer reading TOTAL messages from the first offset,
// reporting msgs/s. "txsend": transactional sends against plain ones (see txSend). Prints one line:
// RESULT {json}. An optional 7th argument of "send" paces its
// warm-up phase to that many msgs/s in all (bench/hold.py's moderate load), instead of flat out.
// With -Dbench.accessKey=AK -Dbench.secretKey=SK the producer signs every request as an ACL client
// does (bench/security.py); TLS is the client's own -Dtls.enable=true.
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Base64;
import java.util.Map;
import java.util.TreeMap;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;

public class E2eBench {
    /** Every message "txsend" got SEND_OK for, committed or plain (what the topic must hold). */
    static final AtomicLong SENT = new AtomicLong();

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        String namesrv = args[1];
        String topic = args[2];
        int total = Integer.parseInt(args[3]);
        int threads = Integer.parseInt(args[4]);
        if (mode.equals("txsend")) {
            txSend(namesrv, topic, total, threads);
        } else if (mode.equals("send")) {
            int warmupSeconds = args.length > 5 ? Integer.parseInt(args[5]) : 0;
            int rate = args.length > 6 ? Integer.parseInt(args[6]) : 0;
            send(namesrv, topic, total, threads, warmupSeconds, rate);
        } else {
            drain(namesrv, topic, total);
        }
    }

    /** With bench.accessKey/bench.secretKey set, a hook that signs each request: AccessKey added,
     *  then the Base64 HmacSHA1 (keyed by the secret) of every ext field value in key order
     *  (Signature left out) followed by the body; else null (no hook). */
    static RPCHook signer() {
        String accessKey = System.getProperty("bench.accessKey");
        String secretKey = System.getProperty("bench.secretKey");
        if (accessKey == null || secretKey == null) {
            return null;
        }
        return new RPCHook() {
            @Override
            public void doBeforeRequest(String remoteAddr, RemotingCommand request) {
                request.addExtField("AccessKey", accessKey);
                request.makeCustomHeaderToNet();
                StringBuilder values = new StringBuilder();
                for (Map.Entry<String, String> field : new TreeMap<>(request.getExtFields()).entrySet()) {
                    if (!field.getKey().equals("Signature")) {
                        values.append(field.getValue());
                    }
                }
                byte[] text = values.toString().getBytes(StandardCharsets.UTF_8);
                byte[] body = request.getBody() == null ? new byte[0] : request.getBody();
                byte[] content = Arrays.copyOf(text, text.length + body.length);
                System.arraycopy(body, 0, content, text.length, body.length);
                try {
                    Mac mac = Mac.getInstance("HmacSHA1");
                    mac.init(new SecretKeySpec(secretKey.getBytes(StandardCharsets.UTF_8), "HmacSHA1"));
                    request.addExtField("Signature", Base64.getEncoder().encodeToString(mac.doFinal(content)));
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            }

            @Override
            public void doAfterResponse(String remoteAddr, RemotingCommand request, RemotingCommand response) {
            }
        };
    }

    static void send(String namesrv, String topic, int total, int threads, int warmupSeconds, int rate) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer(topic + "-bench-pg", signer());
        producer.setNamesrvAddr(namesrv);
        producer.setCompressMsgBodyOverHowmuch(1 << 20);
        producer.start();
        producer.send(new Message(topic, "warmup".getBytes()));
        byte[] body = new byte[1024];
        int warmed = warmUp(producer, topic + "Warm", body, threads, warmupSeconds, rate);
        System.out.println("WARMED");
        System.out.flush();
        AtomicInteger next = new AtomicInteger();
        AtomicInteger failed = new AtomicInteger();
        long[] latencyNanos = new long[total];
        Thread[] workers = new Thread[threads];
        long start = System.nanoTime();
        for (int t = 0; t < threads; t++) {
            workers[t] = new Thread(() -> {
                int i;
                while ((i = next.getAndIncrement()) < total) {
                    long begin = System.nanoTime();
                    try {
                        SendResult r = producer.send(new Message(topic, "TagA", "k" + i, body));
                        if (r.getSendStatus() != SendStatus.SEND_OK) {
                            failed.incrementAndGet();
                        }
                    } catch (Exception e) {
                        failed.incrementAndGet();
                    }
                    latencyNanos[i] = System.nanoTime() - begin;
                }
            });
            workers[t].start();
        }
        for (Thread w : workers) {
            w.join();
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        Arrays.sort(latencyNanos);
        System.out.printf("RESULT {\"msgs_per_s\":%.0f,\"seconds\":%.2f,\"failed\":%d,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"warmup_msgs\":%d}%n",
            total / seconds, seconds, failed.get(), latencyNanos[total / 2] / 1e6, latencyNanos[(int) (total * 0.99)] / 1e6,
            warmed);
        producer.shutdown();
    }

    /** The same load as the measured run, to another topic, for {@code seconds}: both servers (and
     *  this client) reach their steady state (JIT, caches, page cache) before anything counts. With
     *  {@code rate} > 0, send number i leaves at start + i / rate: that many msgs/s in all. */
    static int warmUp(DefaultMQProducer producer, String topic, byte[] body, int threads, int seconds, int rate)
            throws Exception {
        if (seconds <= 0) {
            return 0;
        }
        long start = System.nanoTime();
        long end = start + seconds * 1_000_000_000L;
        AtomicInteger sent = new AtomicInteger();
        AtomicLong tickets = new AtomicLong();
        Thread[] workers = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            workers[t] = new Thread(() -> {
                while (System.nanoTime() < end) {
                    if (rate > 0) {
                        long due = start + tickets.getAndIncrement() * 1_000_000_000L / rate;
                        long wait = due - System.nanoTime();
                        if (wait > 0) {
                            try {
                                TimeUnit.NANOSECONDS.sleep(wait);
                            } catch (InterruptedException e) {
                                return;
                            }
                        }
                    }
                    try {
                        producer.send(new Message(topic, "TagA", body));
                        sent.incrementAndGet();
                    } catch (Exception e) {
                        // a warm-up failure shows in the measured run, if it lasts
                    }
                }
            });
            workers[t].start();
        }
        for (Thread w : workers) {
            w.join();
        }
        return sent.get();
    }

    /** "txsend": TOTAL seconds of transactional sends (prepare, then a COMMIT the listener returns)
     *  and TOTAL seconds of plain sync sends, alternating twice after a warm-up of each, from THREADS
     *  threads: msgs/s of each kind (the median of its two rounds) and how many were committed. */
    static void txSend(String namesrv, String topic, int seconds, int threads) throws Exception {
        TransactionMQProducer producer = new TransactionMQProducer(topic + "-bench-txpg");
        producer.setNamesrvAddr(namesrv);
        producer.setCompressMsgBodyOverHowmuch(1 << 20);
        AtomicLong committed = new AtomicLong();
        producer.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                committed.incrementAndGet();
                return LocalTransactionState.COMMIT_MESSAGE;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                return LocalTransactionState.COMMIT_MESSAGE;
            }
        });
        producer.start();
        producer.send(new Message(topic, "warmup".getBytes()));
        byte[] body = new byte[1024];
        timed(producer, topic, body, threads, 3, true);
        timed(producer, topic, body, threads, 3, false);
        double[] tx = new double[2];
        double[] plain = new double[2];
        for (int round = 0; round < 2; round++) {
            tx[round] = timed(producer, topic, body, threads, seconds, true);
            plain[round] = timed(producer, topic, body, threads, seconds, false);
        }
        System.out.printf("RESULT {\"tx_msgs_per_s\":%.0f,\"plain_msgs_per_s\":%.0f,\"tx_rounds\":[%.0f,%.0f],\"plain_rounds\":[%.0f,%.0f],\"committed\":%d,\"sent_total\":%d}%n",
            (tx[0] + tx[1]) / 2, (plain[0] + plain[1]) / 2, tx[0], tx[1], plain[0], plain[1], committed.get(), SENT.get());
        producer.shutdown();
    }

    static double timed(TransactionMQProducer producer, String topic, byte[] body, int threads, int seconds, boolean tx)
            throws Exception {
        long start = System.nanoTime();
        long end = start + seconds * 1_000_000_000L;
        AtomicInteger sent = new AtomicInteger();
        Thread[] workers = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            workers[t] = new Thread(() -> {
                while (System.nanoTime() < end) {
                    try {
                        Message m = new Message(topic, tx ? "Tx" : "Plain", body);
                        SendResult r = tx ? producer.sendMessageInTransaction(m, null) : producer.send(m);
                        if (r.getSendStatus() == SendStatus.SEND_OK) {
                            sent.incrementAndGet();
                            SENT.incrementAndGet();
                        }
                    } catch (Exception e) {
                        // counted as not sent
                    }
                }
            });
            workers[t].start();
        }
        for (Thread w : workers) {
            w.join();
        }
        return sent.get() / ((System.nanoTime() - start) / 1e9);
    }

    static void drain(String namesrv, String topic, int total) throws Exception {
        CountDownLatch done = new CountDownLatch(total);
        AtomicLong first = new AtomicLong();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(topic + "-bench-cg");
        consumer.setNamesrvAddr(namesrv);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setConsumeMessageBatchMaxSize(32);
        consumer.setPullBatchSize(32);
        consumer.setConsumeThreadMin(4);
        consumer.setConsumeThreadMax(4);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            first.compareAndSet(0, System.nanoTime());
            for (int i = 0; i < msgs.size(); i++) {
                done.countDown();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        long start = System.nanoTime();
        consumer.start();
        boolean all = done.await(600, TimeUnit.SECONDS);
        long end = System.nanoTime();
        double seconds = (end - start) / 1e9;
        double steady = (end - first.get()) / 1e9;  // from the first message: start-up and rebalance left out
        long consumed = total - done.getCount();
        System.out.printf("RESULT {\"msgs_per_s\":%.0f,\"seconds\":%.2f,\"msgs_per_s_from_start\":%.0f,"
            + "\"seconds_from_start\":%.2f,\"all\":%b,\"consumed\":%d}%n",
            consumed / steady, steady, consumed / seconds, seconds, all, consumed);
        consumer.shutdown();
    }
}
