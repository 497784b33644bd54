package rmqproxy.grpcclient;

import java.io.Closeable;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.time.Duration;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientConfigurationBuilder;
import org.apache.rocketmq.client.apis.ClientException;
import org.apache.rocketmq.client.apis.StaticSessionCredentialsProvider;
import org.apache.rocketmq.client.java.misc.MetadataUtils;
import rmqproxy.scenarios.Json;

/**
 * Scenarios of the RocketMQ 5 gRPC client (rocketmq-client-java) against one proxy endpoint.
 *
 * <pre>
 * java -cp ... rmqproxy.grpcclient.Main SCENARIO --endpoint HOST:PORT [--option value ...]
 * </pre>
 *
 * <p>Scenarios: send, simple-consume, push-consume, receive-empty (see {@link SendScenario} and
 * {@link ConsumeScenarios} for their options).  Options every scenario takes: {@code --tls true|false}
 * (default false: plaintext HTTP/2; the client's own default would be TLS), {@code --access-key A
 * --secret-key S} (both or neither: every request is then signed), {@code --namespace NS},
 * {@code --request-timeout-ms N} (the client's per-call timeout, default 3000 as the client's) and
 * {@code --timeout-ms N} (default 120000): the whole run is bounded by it, and a watchdog prints what was
 * gathered so far, with "error" set, when it passes.
 *
 * <p>stdout carries exactly one line, {@code RESULT {json}}, at the end: System.out is redirected to
 * stderr before anything else runs, and the client's log goes to {@code rocketmq_client.log} under
 * {@code -Drocketmq.log.root} ({@link FileLog}: the 5.0.8 jar's own logging is broken, see
 * org.apache.rocketmq.shaded.org.slf4j.impl.StaticLoggerBinder).  The exit code is 0 whenever the RESULT line was printed, even
 * when a client call failed: failures are data ("error": "class: message", plus "code" when the
 * exception carries the proxy's response code), for tests to compare between servers.  Only bad usage
 * (no scenario, an option without its value) exits 2, with just "error" in its RESULT.  Times are
 * wall-clock epoch milliseconds ({@code *_ms}), so they compare with the server's.
 */
public final class Main {
    /** The "response-code=N" and "request-id=R" a 5.x ClientException puts in its message (no getter has them). */
    private static final Pattern RESPONSE_CODE = Pattern.compile("response-code=(-?\\d+)");
    private static final Pattern REQUEST_ID = Pattern.compile("request-id=([^,\\]]+)");

    /** The real stdout; System.out is redirected to stderr so that libraries cannot pollute it. */
    private static PrintStream out;
    private static final AtomicBoolean FINISHED = new AtomicBoolean();

    private Main() {
    }

    public static void main(String[] argv) {
        out = System.out;
        System.setOut(System.err);
        final Args args;
        try {
            args = Args.parse(argv);
        } catch (IllegalArgumentException e) {
            out.println("RESULT " + Json.write(Map.of("error", "usage: Main send|simple-consume|push-consume|"
                + "receive-empty --endpoint HOST:PORT [--option value ...]: " + e.getMessage())));
            out.flush();
            Runtime.getRuntime().halt(2);
            return;
        }
        final Result result = new Result();
        result.put("scenario", args.scenario);
        result.put("client_version", MetadataUtils.getVersion());
        result.put("endpoint", args.get("endpoint"));
        result.put("tls", args.bool("tls", false));
        result.put("started_ms", args.startMs);
        startWatchdog(args, result);
        try {
            run(args, result);
        } catch (Throwable t) {
            result.putAll(error(t));
            result.put("error_trace", trace(t));
        }
        finish(result);
    }

    private static void run(Args a, Result result) throws Exception {
        switch (a.scenario) {
            case "send":
                SendScenario.run(a, result);
                break;
            case "simple-consume":
                ConsumeScenarios.simpleConsume(a, result);
                break;
            case "push-consume":
                ConsumeScenarios.pushConsume(a, result);
                break;
            case "receive-empty":
                ConsumeScenarios.receiveEmpty(a, result);
                break;
            default:
                throw new IllegalArgumentException("unknown scenario " + a.scenario
                    + " (send, simple-consume, push-consume, receive-empty)");
        }
    }

    /** Print the RESULT line once (the scenario's end or the watchdog, whichever comes first) and halt. */
    static void finish(Result result) {
        if (!FINISHED.compareAndSet(false, true)) {
            return;
        }
        result.put("finished_ms", System.currentTimeMillis());
        String line = "RESULT " + result.json();
        synchronized (Main.class) {
            out.println(line);
            out.flush();
        }
        // the client leaves non-daemon threads (gRPC, schedulers) behind even after close()
        Runtime.getRuntime().halt(0);
    }

    private static void startWatchdog(Args a, Result result) {
        final long hardDeadline = a.startMs + a.timeoutMs;
        Thread t = new Thread(() -> {
            long left;
            while ((left = hardDeadline - System.currentTimeMillis()) > 0) {
                try {
                    Thread.sleep(Math.min(left, 500));
                } catch (InterruptedException e) {
                    return;
                }
            }
            result.put("error", "java.util.concurrent.TimeoutException: the scenario ran past --timeout-ms "
                + a.timeoutMs);
            result.put("timed_out", true);
            finish(result);
        }, "scenario-watchdog");
        t.setDaemon(true);
        t.start();
    }

    /** The client configuration of --endpoint, --tls, --access-key/--secret-key, --namespace, --request-timeout-ms. */
    static ClientConfiguration clientConfiguration(Args a) {
        ClientConfigurationBuilder b = ClientConfiguration.newBuilder()
            .setEndpoints(a.require("endpoint"))
            .enableSsl(a.bool("tls", false))
            .setRequestTimeout(Duration.ofMillis(a.longOpt("request-timeout-ms", 3000)));
        String ak = a.get("access-key");
        String sk = a.get("secret-key");
        if ((ak == null) != (sk == null)) {
            throw new IllegalArgumentException("--access-key and --secret-key go together");
        }
        if (ak != null) {
            b.setCredentialProvider(new StaticSessionCredentialsProvider(ak, sk));
        }
        String ns = a.get("namespace");
        if (ns != null) {
            b.setNamespace(ns);
        }
        return b.build();
    }

    /**
     * "error": "class: message" of the first ClientException among {@code t} and its causes (else of
     * {@code t}), plus "code" (the proxy's response code, e.g. 40401) and "request_id" when its message
     * names them, and "root_cause" (the innermost cause, e.g. a gRPC StatusRuntimeException) when that
     * is another exception.
     */
    static Map<String, Object> error(Throwable t) {
        Throwable shown = null;
        Throwable root = t;
        for (Throwable cur = t; cur != null; cur = cur.getCause() == cur ? null : cur.getCause()) {
            if (shown == null && cur instanceof ClientException) {
                shown = cur;
            }
            root = cur;
        }
        if (shown == null) {
            shown = t;
        }
        Map<String, Object> r = new LinkedHashMap<>();
        String message = String.valueOf(shown.getMessage());
        r.put("error", shown.getClass().getName() + ": " + (message.length() > 1000 ? message.substring(0, 1000) : message));
        if (root != shown) {
            r.put("root_cause", root.getClass().getName() + ": " + root.getMessage());
        }
        Matcher code = RESPONSE_CODE.matcher(message);
        if (code.find()) {
            r.put("code", Integer.parseInt(code.group(1)));
        }
        Matcher requestId = REQUEST_ID.matcher(message);
        if (requestId.find()) {
            r.put("request_id", requestId.group(1));
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
     * Close a client within {@code waitMs} (a push consumer's close waits for in-flight consumption and
     * the proxy's answers): the outcome goes to "close" ({"elapsed_ms"} or {"error"}); past the wait the
     * run goes on and "close" says so.
     */
    static void closeBounded(Closeable client, long waitMs, Result result) {
        if (client == null) {
            return;
        }
        final Map<String, Object> outcome = new LinkedHashMap<>();
        final long start = System.currentTimeMillis();
        Thread t = new Thread(() -> {
            try {
                client.close();
                synchronized (outcome) {
                    outcome.put("elapsed_ms", System.currentTimeMillis() - start);
                }
            } catch (Throwable e) {
                synchronized (outcome) {
                    outcome.putAll(error(e));
                }
            }
        }, "client-close");
        t.setDaemon(true);
        t.start();
        try {
            t.join(waitMs);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        synchronized (outcome) {
            if (outcome.isEmpty()) {
                outcome.put("error", "close() still running after " + waitMs + " ms");
            }
            result.put("close", new LinkedHashMap<>(outcome));
        }
    }

    /** Sleep without throwing (scenario loops check their own deadlines). */
    static void pause(long ms) {
        try {
            Thread.sleep(Math.max(0, ms));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** The scenario's RESULT object, written by the scenario thread and read by the watchdog. */
    static final class Result {
        private final Map<String, Object> map = new LinkedHashMap<>();

        synchronized void put(String key, Object value) {
            map.put(key, value);
        }

        synchronized void putAll(Map<String, Object> values) {
            map.putAll(values);
        }

        /** A list under {@code key}, made on first use; safe to append to while the watchdog writes it. */
        @SuppressWarnings("unchecked")
        synchronized List<Object> list(String key) {
            return (List<Object>) map.computeIfAbsent(key, k -> new CopyOnWriteArrayList<>());
        }

        synchronized String json() {
            return Json.write(map);
        }
    }

    /** "SCENARIO --key value ..." with typed getters; the run's deadlines come from --timeout-ms. */
    static final class Args {
        final String scenario;
        final long startMs = System.currentTimeMillis();
        final long timeoutMs;
        private final Map<String, String> opts;

        private Args(String scenario, Map<String, String> opts) {
            this.scenario = scenario;
            this.opts = opts;
            this.timeoutMs = longOpt("timeout-ms", 120_000);
        }

        static Args parse(String[] argv) {
            if (argv.length == 0) {
                throw new IllegalArgumentException("no scenario given");
            }
            Map<String, String> opts = new HashMap<>();
            for (int i = 1; i < argv.length; i += 2) {
                if (!argv[i].startsWith("--") || i + 1 >= argv.length) {
                    throw new IllegalArgumentException("expected --key value at " + argv[i]);
                }
                opts.put(argv[i].substring(2), argv[i + 1]);
            }
            return new Args(argv[0], opts);
        }

        String get(String key) {
            return opts.get(key);
        }

        String get(String key, String dflt) {
            return opts.getOrDefault(key, dflt);
        }

        String require(String key) {
            String v = opts.get(key);
            if (v == null) {
                throw new IllegalArgumentException("--" + key + " is required");
            }
            return v;
        }

        int intOpt(String key, int dflt) {
            return opts.containsKey(key) ? Integer.parseInt(opts.get(key)) : dflt;
        }

        long longOpt(String key, long dflt) {
            return opts.containsKey(key) ? Long.parseLong(opts.get(key)) : dflt;
        }

        boolean bool(String key, boolean dflt) {
            return opts.containsKey(key) ? Boolean.parseBoolean(opts.get(key)) : dflt;
        }

        /** When loops stop on their own: 3 s before the watchdog's hard deadline, to leave time for close(). */
        long softDeadline() {
            return startMs + timeoutMs - Math.min(3000, timeoutMs / 4);
        }
    }
}
