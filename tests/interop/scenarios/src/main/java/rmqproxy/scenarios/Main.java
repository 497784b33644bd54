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

/**
 * Real-client scenarios against a RocketMQ name server + broker.
 *
 * <pre>
 * java -cp ... rmqproxy.scenarios.Main SCENARIO --namesrv HOST:PORT [--option value ...]
 * </pre>
 *
 * <p>Scenarios: send, push, litepull, tags, tagskip, retry, restart, rebalance, mqadmin, transaction, sql,
 * reply, timer (see each class).
 * stdout carries only progress lines (free text, and "PROGRESS k=v ..." for the restart
 * scenario) and exactly one final line {@code RESULT {json}}; everything else the JVM or the
 * RocketMQ libraries print is redirected to stderr.  A scenario that throws still prints a
 * RESULT, with "error" set.
 */
public final class Main {
    /** The real stdout; System.out is redirected to stderr so that libraries cannot pollute it. */
    private static PrintStream out;

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
            Map<String, Object> body = run(args);
            result.putAll(body);
        } catch (Throwable t) {
            result.put("error", describe(t));
            result.put("error_trace", trace(t));
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
            case "transaction":
                return TransactionScenario.run(a);
            case "sql":
                return SqlScenario.run(a);
            case "reply":
                return ReplyScenario.run(a);
            case "timer":
                return TimerScenario.run(a);
            default:
                throw new IllegalArgumentException("unknown scenario " + a.scenario
                    + " (send, push, litepull, tags, tagskip, retry, restart, rebalance, mqadmin, transaction, sql, reply, timer)");
        }
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
    }
}
