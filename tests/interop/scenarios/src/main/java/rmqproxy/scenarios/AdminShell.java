package rmqproxy.scenarios;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.security.Permission;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.commons.cli.CommandLineParser;
import org.apache.commons.cli.Options;
import org.apache.commons.cli.ParseException;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.srvutil.ServerUtil;
import org.apache.rocketmq.tools.command.MQAdminStartup;
import org.apache.rocketmq.tools.command.SubCommand;

/**
 * Scenario "adminshell": one JVM that runs any number of mqadmin commands (and drives live clients
 * they need) on request, so a test pays for one JVM start instead of one per command.
 *
 * <p>stdin carries one JSON value per line and stdout answers each with one line {@code REPLY {json}}:
 * <ul>
 * <li>an array of strings is an mqadmin command line without -n (added: --namesrv), run through
 *     MQAdminStartup.main0 like the mqadmin script; reply {args, stdout, stderr, thrown, elapsed_ms}.
 *     The arguments are parsed against the subcommand's own declared options first (every registered
 *     subcommand), since a parse error or -h inside main0 calls System.exit; an exit that still
 *     happens is trapped and reported as thrown, never ending the JVM;</li>
 * <li>{"op":"send","topic":T,"count":N,"key_prefix":P,"tag":TAG} sends N sync messages from the
 *     shell's producer (group --producer-group) after refreshing T's route from the name server;
 *     reply {sent_ok, failed, errors, keys, msg_ids, offset_msg_ids, queues, first_store_ms};</li>
 * <li>{"op":"consume","id":NAME,"group":G,"topic":T,"fail":bool,"max_reconsume":N} starts a push
 *     consumer (first offset; "fail" answers RECONSUME_LATER to every message); reply {client_id};</li>
 * <li>{"op":"received","id":NAME} reply {deliveries, keys: {key: times}, reconsume: {key: max reconsumeTimes}};</li>
 * <li>{"op":"stop","id":NAME} shuts that consumer down (offsets are committed on shutdown);</li>
 * <li>{"op":"console","call":NAME,...} one admin call of the RocketMQ console, made on a VIP-channel
 *     admin client as the console's defaults make it (ConsoleCalls); reply {result, channels}.</li>
 * </ul>
 * A line "stop" (or EOF) ends the shell; RESULT {commands: n}.
 */
final class AdminShell {
    private static final Map<String, DefaultMQPushConsumer> CONSUMERS = new ConcurrentHashMap<>();
    private static final Map<String, Map<String, AtomicInteger>> SEEN = new ConcurrentHashMap<>();
    private static final Map<String, Map<String, Integer>> RECONSUME = new ConcurrentHashMap<>();
    private static final Map<String, AtomicLong> DELIVERIES = new ConcurrentHashMap<>();

    private AdminShell() {
    }

    /** Thrown instead of ending the JVM when mqadmin code calls System.exit. */
    static final class ExitTrapped extends SecurityException {
        private static final long serialVersionUID = 1L;

        ExitTrapped(int status) {
            super("System.exit(" + status + ") trapped");
        }
    }

    @SuppressWarnings("removal")
    private static void trapExit() {
        System.setSecurityManager(new SecurityManager() {
            @Override
            public void checkExit(int status) {
                throw new ExitTrapped(status);
            }

            @Override
            public void checkPermission(Permission perm) {
                // everything else is allowed
            }

            @Override
            public void checkPermission(Permission perm, Object context) {
                // everything else is allowed
            }
        });
    }

    static Map<String, Object> run(Main.Args a) throws Exception {
        String ns = a.namesrv();
        System.setProperty("rocketmq.client.rebalance.waitInterval", a.get("rebalance-interval-ms", "1000"));
        AdminScenario.prepareHome();  // before MQAdminStartup loads: it reads rocketmq.home.dir once
        trapExit();
        DefaultMQProducer producer = new DefaultMQProducer(a.get("producer-group", "adminshell-producer"), Main.aclHook());
        producer.setNamesrvAddr(ns);
        producer.start();
        int count = 0;
        Main.progress("READY " + Main.clientVersion());
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        try {
            for (String line = in.readLine(); line != null && !line.trim().equals("stop"); line = in.readLine()) {
                if (line.trim().isEmpty()) {
                    continue;
                }
                Map<String, Object> reply;
                try {
                    Object req = Json.read(line);
                    if (req instanceof List) {
                        List<String> args = new ArrayList<>();
                        for (Object o : (List<?>) req) {
                            args.add(String.valueOf(o));
                        }
                        reply = admin(ns, args);
                    } else {
                        reply = op(ns, producer, (Map<?, ?>) req);
                    }
                } catch (Throwable t) {
                    reply = new LinkedHashMap<>();
                    reply.put("thrown", Main.describe(t));
                }
                count++;
                Main.progress("REPLY " + Json.write(reply));
            }
        } finally {
            // a 5.x admin's shutdown waits out its event executor's 3 s poll: alongside the clients'
            Thread consoleStop = new Thread(ConsoleCalls::shutdown, "console-admin-shutdown");
            consoleStop.start();
            for (DefaultMQPushConsumer c : CONSUMERS.values()) {
                c.shutdown();
            }
            producer.shutdown();
            consoleStop.join(10000);
        }
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("commands", count);
        return r;
    }

    @SuppressWarnings("unchecked")
    private static SubCommand find(String name) throws Exception {
        MQAdminStartup.initCommand();
        Field f;
        try {
            f = MQAdminStartup.class.getDeclaredField("subCommandList");  // 4.9.x
        } catch (NoSuchFieldException e) {
            f = MQAdminStartup.class.getDeclaredField("SUB_COMMANDS");  // 5.x
        }
        f.setAccessible(true);
        List<SubCommand> list = (List<SubCommand>) f.get(null);
        SubCommand found = null;
        for (SubCommand c : list) {
            if (c.commandName().equals(name)) {
                found = c;
                break;
            }
        }
        list.clear();  // main0 registers every command again on each call
        return found;
    }

    private static CommandLineParser parser() throws Exception {
        try {
            return (CommandLineParser) Class.forName("org.apache.commons.cli.DefaultParser").getConstructor().newInstance();
        } catch (ClassNotFoundException e) {
            return (CommandLineParser) Class.forName("org.apache.commons.cli.PosixParser").getConstructor().newInstance();
        }
    }

    private static Map<String, Object> admin(String ns, List<String> given) throws Exception {
        List<String> args = new ArrayList<>(given);
        if (!args.isEmpty() && !args.contains("-n")) {
            args.add(1, "-n");
            args.add(2, ns);
        }
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("args", args);
        SubCommand sub = args.isEmpty() ? null : find(args.get(0));
        String refused = null;
        if (sub == null) {
            refused = "no such subcommand";
        } else if (args.contains("-h")) {
            refused = "-h prints help and exits";
        } else {
            Options options = sub.buildCommandlineOptions(ServerUtil.buildCommandlineOptions(new Options()));
            try {
                parser().parse(options, args.subList(1, args.size()).toArray(new String[0]));
            } catch (ParseException e) {
                refused = e.getMessage();
            }
        }
        if (refused != null) {
            r.put("stdout", "");
            r.put("stderr", "");
            r.put("thrown", "argument error (not run): " + refused);
            r.put("elapsed_ms", 0);
            return r;
        }
        Main.progress("# mqadmin " + String.join(" ", args));
        Set<Thread> before = new HashSet<>(Thread.getAllStackTraces().keySet());
        Thread main = Thread.currentThread();
        AtomicBoolean done = new AtomicBoolean();
        Thread nudger = new Thread(() -> nudgeShutdown(main, before, done), "adminshell-nudger");
        nudger.setDaemon(true);
        nudger.start();
        try {
            r.putAll(AdminScenario.runArgs(args.toArray(new String[0])));
        } finally {
            done.set(true);
        }
        return r;
    }

    /**
     * 5.x tools: DefaultMQAdminExt.shutdown joins the admin client's NettyEventExecutor, which only
     * notices it was stopped when its 3 s queue poll times out (every 5.x mqadmin command pays this
     * on exit). While the command's thread waits in ServiceThread.shutdown, interrupt the
     * executors this command created (never the shell's own clients'), so the poll ends at once.
     */
    private static void nudgeShutdown(Thread main, Set<Thread> before, AtomicBoolean done) {
        while (!done.get()) {
            boolean joining = false;
            for (StackTraceElement e : main.getStackTrace()) {
                if (e.getClassName().endsWith(".ServiceThread") && e.getMethodName().equals("shutdown")) {
                    joining = true;
                    break;
                }
            }
            if (joining) {
                for (Thread t : Thread.getAllStackTraces().keySet()) {
                    if (!before.contains(t) && t.getName().equals("NettyEventExecutor")) {
                        t.interrupt();
                    }
                }
            }
            try {
                Thread.sleep(20);
            } catch (InterruptedException ex) {
                return;
            }
        }
    }

    private static Map<String, Object> op(String ns, DefaultMQProducer producer, Map<?, ?> req) throws Exception {
        String op = String.valueOf(req.get("op"));
        switch (op) {
            case "send":
                return send(producer, req);
            case "consume":
                return consume(ns, req);
            case "received":
                return received(String.valueOf(req.get("id")));
            case "stop": {
                DefaultMQPushConsumer c = CONSUMERS.remove(String.valueOf(req.get("id")));
                if (c != null) {
                    c.shutdown();
                }
                Map<String, Object> r = new LinkedHashMap<>();
                r.put("stopped", c != null);
                return r;
            }
            case "console":
                return ConsoleCalls.call(ns, req);
            default:
                throw new IllegalArgumentException("unknown op " + op + " (send, consume, received, stop, console)");
        }
    }

    private static String str(Map<?, ?> req, String key, String dflt) {
        Object v = req.get(key);
        return v == null ? dflt : String.valueOf(v);
    }

    private static Map<String, Object> send(DefaultMQProducer producer, Map<?, ?> req) throws Exception {
        String topic = str(req, "topic", null);
        int n = Integer.parseInt(str(req, "count", "1"));
        String prefix = str(req, "key_prefix", topic);
        String tag = str(req, "tag", "TagA");
        List<Object> keys = new ArrayList<>();
        List<Object> ids = new ArrayList<>();
        List<Object> offsetIds = new ArrayList<>();
        List<Object> errors = new ArrayList<>();
        Map<String, Integer> queues = new LinkedHashMap<>();
        int ok = 0;
        int failed = 0;
        long firstStore = 0;
        // the route of T as the name server has it now (perm changes included), not a cached copy
        producer.getDefaultMQProducerImpl().getmQClientFactory().updateTopicRouteInfoFromNameServer(topic);
        for (int i = 0; i < n; i++) {
            String key = prefix + "-" + i;
            try {
                SendResult sr = producer.send(new Message(topic, tag, key, key.getBytes(StandardCharsets.UTF_8)));
                ok++;
                keys.add(key);
                ids.add(sr.getMsgId());
                offsetIds.add(sr.getOffsetMsgId());
                queues.merge(sr.getMessageQueue().getBrokerName() + ":" + sr.getMessageQueue().getQueueId(), 1, Integer::sum);
                if (firstStore == 0) {
                    firstStore = System.currentTimeMillis();
                }
            } catch (Exception e) {
                failed++;
                if (errors.size() < 3) {
                    Map<String, Object> err = new LinkedHashMap<>(Main.brokerAnswer(e));
                    err.put("error", Main.describe(e));
                    errors.add(err);
                }
            }
        }
        if (ok > 0) {
            // the broker learns of a producer from its heartbeat (every 30 s; the first went out before any route)
            producer.getDefaultMQProducerImpl().getmQClientFactory().sendHeartbeatToAllBrokerWithLock();
        }
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("sent_ok", ok);
        r.put("failed", failed);
        r.put("errors", errors);
        r.put("keys", keys);
        r.put("msg_ids", ids);
        r.put("offset_msg_ids", offsetIds);
        r.put("queues", queues);
        r.put("first_store_ms", firstStore);
        return r;
    }

    private static Map<String, Object> consume(String ns, Map<?, ?> req) throws Exception {
        String id = str(req, "id", null);
        String group = str(req, "group", null);
        String topic = str(req, "topic", null);
        boolean fail = Boolean.parseBoolean(str(req, "fail", "false"));
        Map<String, AtomicInteger> seen = new ConcurrentHashMap<>();
        Map<String, Integer> reconsume = new ConcurrentHashMap<>();
        AtomicLong deliveries = new AtomicLong();
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group, Main.aclHook(),
            new org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely());
        c.setNamesrvAddr(ns);
        c.setInstanceName("shell-" + id);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setPersistConsumerOffsetInterval(1000);
        if (req.get("max_reconsume") != null) {
            c.setMaxReconsumeTimes(Integer.parseInt(str(req, "max_reconsume", "16")));
        }
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                deliveries.incrementAndGet();
                seen.computeIfAbsent(m.getKeys(), k -> new AtomicInteger()).incrementAndGet();
                reconsume.merge(m.getKeys(), m.getReconsumeTimes(), Math::max);
            }
            return fail ? ConsumeConcurrentlyStatus.RECONSUME_LATER : ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        CONSUMERS.put(id, c);
        SEEN.put(id, seen);
        RECONSUME.put(id, reconsume);
        DELIVERIES.put(id, deliveries);
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("client_id", c.getDefaultMQPushConsumerImpl().getmQClientFactory().getClientId());
        return r;
    }

    private static Map<String, Object> received(String id) {
        Map<String, Object> keys = new LinkedHashMap<>();
        Map<String, AtomicInteger> seen = SEEN.getOrDefault(id, new ConcurrentHashMap<>());
        for (Map.Entry<String, AtomicInteger> e : seen.entrySet()) {
            keys.put(e.getKey(), e.getValue().get());
        }
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("deliveries", DELIVERIES.getOrDefault(id, new AtomicLong()).get());
        r.put("keys", keys);
        r.put("reconsume", new LinkedHashMap<>(RECONSUME.getOrDefault(id, new ConcurrentHashMap<>())));
        return r;
    }
}
