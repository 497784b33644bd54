package rmqproxy.scenarios;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;

/**
 * "follow": a push consumer (CONSUME_FROM_FIRST_OFFSET, concurrently, "*") on --topic for as long
 * as the test wants (until a line on stdin), while brokers go down and come back under it: which
 * broker served each message is what the test asks about, so every pull is counted by the address
 * it went to, and every key by the address of the pull that brought it.
 *
 * <p>Prints "PROGRESS distinct=N deliveries=N watched_queues=N" every --progress-ms (250), the last
 * the number of queues whose latest pull went to --watch-addr (0 without it): how the test knows
 * the consumer has gone back to a broker. --poll-namesrv-ms sets pollNameServerInterval (the
 * client's 30 s when not given), so a broker back in the route is seen soon, and --heartbeat-ms
 * heartbeatBrokerInterval (30 s): a broker back from a crash knows no consumer, and answers its
 * pulls SUBSCRIPTION_NOT_EXIST, until the next heartbeat. Result: deliveries,
 * counts (key -> deliveries), pulls (address -> pulls sent there), pulled_from (address -> the
 * distinct keys pulls from there brought).
 */
final class FollowScenario {
    /** RequestCode.PULL_MESSAGE. */
    private static final int PULL_MESSAGE = 11;

    private FollowScenario() {
    }

    static Map<String, Object> run(Main.Args a) throws Exception {
        String topic = a.get("topic");
        String group = a.get("group");
        long progressMs = a.getLong("progress-ms", 250);
        String watched = a.get("watch-addr", "");
        Map<String, AtomicInteger> counts = new ConcurrentHashMap<>();
        AtomicInteger deliveries = new AtomicInteger();
        PullLedger ledger = new PullLedger();

        DefaultMQPushConsumer c =
            new DefaultMQPushConsumer(group, Main.withAcl(ledger), new AllocateMessageQueueAveragely());
        c.setNamesrvAddr(a.namesrv());
        Main.intervals(c, a);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                deliveries.incrementAndGet();
                counts.computeIfAbsent(m.getKeys(), k -> new AtomicInteger()).incrementAndGet();
                ledger.delivered(m);
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        Main.progress("# follow consumer " + group + " started on " + topic);
        Thread stdin = new Thread(Main::awaitStop, "scenario-stdin");
        stdin.setDaemon(true);
        stdin.start();
        while (stdin.isAlive()) {
            Main.progress("PROGRESS distinct=" + counts.size() + " deliveries=" + deliveries.get()
                + " watched_queues=" + ledger.queuesLastPulledAt(watched));
            stdin.join(progressMs);
        }
        c.shutdown();

        Map<String, Object> r = new TreeMap<>();
        r.put("topic", topic);
        r.put("group", group);
        r.put("deliveries", deliveries.get());
        Map<String, Integer> byKey = new TreeMap<>();
        counts.forEach((k, v) -> byKey.put(k, v.get()));
        r.put("counts", byKey);
        r.putAll(ledger.report());
        return r;
    }

    /**
     * Where each pull went, by address, and which pull brought a message: a push consumer has one
     * pull of a queue out at a time, asking from where the last one ended, so the pull that brought
     * (queue, offset) is the last one sent for that queue from an offset at or below it. (A 4.9.x
     * client runs no RPC hook after an asynchronous call, so the answers cannot be looked at.)
     */
    private static final class PullLedger implements RPCHook {
        private final Map<String, AtomicInteger> pulls = new ConcurrentHashMap<>();
        private final Map<Integer, TreeMap<Long, String>> byQueue = new ConcurrentHashMap<>();
        private final Map<String, Set<String>> keys = new ConcurrentHashMap<>();

        @Override
        public void doBeforeRequest(String remoteAddr, RemotingCommand request) {
            if (request.getCode() != PULL_MESSAGE) {
                return;
            }
            request.makeCustomHeaderToNet();  // the header's fields as ext fields (else only when encoded)
            pulls.computeIfAbsent(remoteAddr, k -> new AtomicInteger()).incrementAndGet();
            int queue = Integer.parseInt(request.getExtFields().get("queueId"));
            long offset = Long.parseLong(request.getExtFields().get("queueOffset"));
            TreeMap<Long, String> sent = byQueue.computeIfAbsent(queue, k -> new TreeMap<>());
            synchronized (sent) {
                sent.put(offset, remoteAddr);
            }
        }

        @Override
        public void doAfterResponse(String remoteAddr, RemotingCommand request, RemotingCommand response) {
        }

        /** Note under the address of the pull that brought it that {@code m} arrived. */
        void delivered(MessageExt m) {
            TreeMap<Long, String> sent = byQueue.get(m.getQueueId());
            Map.Entry<Long, String> pull = null;
            if (sent != null) {
                synchronized (sent) {
                    pull = sent.floorEntry(m.getQueueOffset());
                }
            }
            String addr = pull == null ? "unknown" : pull.getValue();
            keys.computeIfAbsent(addr, k -> ConcurrentHashMap.newKeySet()).add(String.valueOf(m.getKeys()));
        }

        /** How many queues' latest pull went to {@code addr}. */
        int queuesLastPulledAt(String addr) {
            int n = 0;
            for (TreeMap<Long, String> sent : byQueue.values()) {
                synchronized (sent) {
                    if (!sent.isEmpty() && sent.lastEntry().getValue().equals(addr)) {
                        n++;
                    }
                }
            }
            return n;
        }

        Map<String, Object> report() {
            Map<String, Object> r = new TreeMap<>();
            Map<String, Integer> byAddr = new TreeMap<>();
            pulls.forEach((addr, n) -> byAddr.put(addr, n.get()));
            r.put("pulls", byAddr);
            Map<String, List<String>> from = new TreeMap<>();
            keys.forEach((addr, ks) -> from.put(addr, new ArrayList<>(new TreeSet<>(ks))));
            r.put("pulled_from", from);
            return r;
        }
    }
}
