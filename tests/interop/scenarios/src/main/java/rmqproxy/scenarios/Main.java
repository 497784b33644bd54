package rmqproxy.scenarios;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.ClientConfig;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;

/**
 * Real-client scenarios against a RocketMQ name server + broker.
 *
 * <pre>
 * java -cp ... rmqproxy.scenarios.Main SCENARIO --namesrv HOST:PORT [--option value ...]
 * </pre>
 *
 * <p>Scenarios: send, push, litepull, tags, tagskip, retry, restart, rebalance, mqadmin, adminshell, transaction, sql,
 * reply, timer, follow (see each class).
 * stdout carries only progress lines (free text, and "PROGRESS k=v ..." for the restart
 * scenario) and exactly one final line {@code RESULT {json}}; everything else the JVM or the
 * RocketMQ libraries print is redirected to stderr.  A scenario that throws still prints a
 * RESULT, with "error" set (and, when a broker's answer caused it, "error_broker_code",
 * "error_broker_remark" and "error_broker_addr": the code, remark and address of the first
 * MQBrokerException among the causes).
 *
 * <p>ACL: with {@code --access-key AK --secret-key SK} (both or neither) the clients of the send,
 * push, tags, tagskip and litepull scenarios and the mqadmin commands are built with
 * {@code new AclClientRPCHook(new SessionCredentials(AK, SK))}, which signs every request (AccessKey
 * and Signature ext fields); the RESULT then carries "access_key".  Without them the clients are
 * built exactly as before (a null RPCHook is what the one-argument constructors pass).
 */
public final class Main {
    /** The real stdout; System.out is redirected to stderr so that libraries cannot pollute it. */
    private static PrintStream out;
    /** The ACL signing hook of --access-key/--secret-key, or null without them (set once, before any scenario). */
    private static RPCHook aclHook;

    private Main() {
    }

    public static void main(String[] argv) {
        out = System.out;
        System.setOut(System.err);
        Map<String, Object> result = new LinkedHashMap<>();
        int rc = 0;
        long start = System.currentTimeMillis();
        try {
            Args args = Args.parse(argv);
            result.put("scenario", args.scenario);
            result.put("client_version", clientVersion());
            aclHook = args.aclHook();
            if (aclHook != null) {
                result.put("access_key", args.get("access-key"));
            }
            Map<String, Object> body = run(args);
            result.putAll(body);
        } catch (Throwable t) {
            result.put("error", describe(t));
            result.put("error_trace", trace(t));
            result.putAll(brokerAnswer(t));
            rc = 1;
        }
        result.put("scenario_elapsed_ms", System.currentTimeMillis() - start);
        synchronized (Main.class) {
            out.println("RESULT " + Json.write(result));
            out.flush();
        }
        // client libraries leave non-daemon threads behind after shutdown
        Runtime.getRuntime().halt(rc);
    }

    private static Map<String, Object> run(Args a) throws Exception {
        switch (a.scenario) {
            case "send":
                return SendScenario.run(a);
            case "push":
                return ConsumeScenarios.push(a);
            case "litepull":
                return ConsumeScenarios.litePull(a);
            case "tags":
                return ConsumeScenarios.tags(a);
            case "tagskip":
                return ConsumeScenarios.tagSkip(a);
            case "retry":
                return RetryScenario.run(a);
            case "restart":
                return RestartScenario.run(a);
            case "rebalance":
                return RebalanceScenario.run(a);
            case "mqadmin":
                return AdminScenario.run(a);
            case "adminshell":
                return AdminShell.run(a);
            case "transaction":
                return TransactionScenario.run(a);
            case "sql":
                return SqlScenario.run(a);
            case "reply":
                return ReplyScenario.run(a);
            case "timer":
                return TimerScenario.run(a);
            case "follow":
                return FollowScenario.run(a);
            default:
                throw new IllegalArgumentException("unknown scenario " + a.scenario
                    + " (send, push, litepull, tags, tagskip, retry, restart, rebalance, mqadmin, adminshell, transaction, sql, reply, timer, follow)");
        }
    }

    /**
     * --heartbeat-ms and --poll-namesrv-ms as {@code client}'s heartbeatBrokerInterval and
     * pollNameServerInterval (left at the client's 30 s each when not given).
     */
    static void intervals(ClientConfig client, Args a) {
        int heartbeatMs = a.getInt("heartbeat-ms", 0);
        int pollMs = a.getInt("poll-namesrv-ms", 0);
        if (heartbeatMs > 0) {
            client.setHeartbeatBrokerInterval(heartbeatMs);
        }
        if (pollMs > 0) {
            client.setPollNameServerInterval(pollMs);
        }
    }

    /** The RPCHook clients are built with: the ACL signer of --access-key/--secret-key, or null. */
    static RPCHook aclHook() {
        return aclHook;
    }

    /**
     * The ACL signer (if any) followed by {@code extra} (if any) as one hook, for a client that
     * needs a hook of its own as well; null when both are null.
     */
    static RPCHook withAcl(RPCHook extra) {
        final RPCHook acl = aclHook;
        if (acl == null || extra == null) {
            return acl == null ? extra : acl;
        }
        return new RPCHook() {
            @Override
            public void doBeforeRequest(String remoteAddr, RemotingCommand request) {
                acl.doBeforeRequest(remoteAddr, request);
                extra.doBeforeRequest(remoteAddr, request);
            }

            @Override
            public void doAfterResponse(String remoteAddr, RemotingCommand request, RemotingCommand response) {
                acl.doAfterResponse(remoteAddr, request, response);
                extra.doAfterResponse(remoteAddr, request, response);
            }
        };
    }

    /** Print one progress line on the real stdout. */
    static void progress(String line) {
        synchronized (Main.class) {
            out.println(line);
            out.flush();
        }
    }

    static String clientVersion() {
        return org.apache.rocketmq.common.MQVersion.getVersionDesc(org.apache.rocketmq.common.MQVersion.CURRENT_VERSION);
    }

    /** "java.class.Name: message" plus the causes' messages. */
    static String describe(Throwable t) {
        StringBuilder sb = new StringBuilder();
        Throwable cur = t;
        int depth = 0;
        while (cur != null && depth < 5) {
            if (depth > 0) {
                sb.append(" <- caused by ");
            }
            sb.append(cur.getClass().getName()).append(": ").append(cur.getMessage());
            if (cur.getCause() == cur) {
                break;
            }
            cur = cur.getCause();
            depth++;
        }
        String s = sb.toString();
        return s.length() > 2000 ? s.substring(0, 2000) + "..." : s;
    }

    /** error_broker_code/remark/addr of the first MQBrokerException among t and its causes (empty if none). */
    static Map<String, Object> brokerAnswer(Throwable t) {
        Map<String, Object> r = new LinkedHashMap<>();
        Throwable cur = t;
        for (int depth = 0; cur != null && depth < 10; depth++, cur = cur.getCause() == cur ? null : cur.getCause()) {
            if (cur instanceof org.apache.rocketmq.client.exception.MQBrokerException) {
                org.apache.rocketmq.client.exception.MQBrokerException b = (org.apache.rocketmq.client.exception.MQBrokerException) cur;
                r.put("error_broker_code", b.getResponseCode());
                r.put("error_broker_remark", b.getErrorMessage());
                r.put("error_broker_addr", b.getBrokerAddr());
                break;
            }
        }
        return r;
    }

    static String trace(Throwable t) {
        StringWriter sw = new StringWriter();
        t.printStackTrace(new PrintWriter(sw));
        String s = sw.toString();
        return s.length() > 4000 ? s.substring(0, 4000) + "..." : s;
    }

    /**
     * A sync send for set-up steps (creating a topic, seeding a scenario): retried up to 5 times,
     * 500 ms apart, because the first send of a cold JVM (route lookups, connects, class loading on
     * 2 cores) can exceed the 3 s send timeout.  Scenario 1 itself never retries.
     */
    static org.apache.rocketmq.client.producer.SendResult setupSend(org.apache.rocketmq.client.producer.DefaultMQProducer p,
        org.apache.rocketmq.common.message.Message msg) throws Exception {
        Exception last = null;
        for (int attempt = 0; attempt < 5; attempt++) {
            try {
                return p.send(msg);
            } catch (Exception e) {
                last = e;
                progress("# set-up send failed (attempt " + (attempt + 1) + "): " + describe(e));
                sleep(500);
            }
        }
        throw last;
    }

    /** Block until a line (or EOF) arrives on stdin: how the test tells a running scenario to stop. */
    static void awaitStop() {
        try {
            new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
        } catch (IOException ignored) {
            // closed: stop as well
        }
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        }
    }

    /** Scenario name and "--name value" options. */
    static final class Args {
        final String scenario;
        private final Map<String, String> opts;

        private Args(String scenario, Map<String, String> opts) {
            this.scenario = scenario;
            this.opts = opts;
        }

        static Args parse(String[] argv) {
            if (argv.length == 0) {
                throw new IllegalArgumentException("usage: Main SCENARIO --namesrv HOST:PORT [--option value ...]");
            }
            Map<String, String> opts = new HashMap<>();
            for (int i = 1; i < argv.length; i++) {
                String k = argv[i];
                if (!k.startsWith("--") || i + 1 >= argv.length) {
                    throw new IllegalArgumentException("expected --name value pairs, got " + k);
                }
                opts.put(k.substring(2), argv[++i]);
            }
            return new Args(argv[0], opts);
        }

        String get(String name) {
            String v = opts.get(name);
            if (v == null) {
                throw new IllegalArgumentException("missing --" + name);
            }
            return v;
        }

        String get(String name, String dflt) {
            return opts.getOrDefault(name, dflt);
        }

        int getInt(String name, int dflt) {
            return opts.containsKey(name) ? Integer.parseInt(opts.get(name)) : dflt;
        }

        long getLong(String name, long dflt) {
            return opts.containsKey(name) ? Long.parseLong(opts.get(name)) : dflt;
        }

        String namesrv() {
            return get("namesrv");
        }

        /** {@code AclClientRPCHook(SessionCredentials(--access-key, --secret-key))}, or null when neither is given. */
        RPCHook aclHook() {
            String ak = opts.get("access-key");
            String sk = opts.get("secret-key");
            if (ak == null && sk == null) {
                return null;
            }
            if (ak == null || sk == null) {
                throw new IllegalArgumentException("--access-key and --secret-key go together");
            }
            return new AclClientRPCHook(new SessionCredentials(ak, sk));
        }
    }
}
