package rmqproxy.scenarios;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.commons.cli.Options;
import org.apache.commons.cli.ParseException;
import org.apache.commons.cli.PosixParser;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.srvutil.ServerUtil;
import org.apache.rocketmq.tools.command.MQAdminStartup;
import org.apache.rocketmq.tools.command.SubCommand;
import org.apache.rocketmq.tools.command.broker.BrokerStatusSubCommand;
import org.apache.rocketmq.tools.command.cluster.ClusterListSubCommand;
import org.apache.rocketmq.tools.command.consumer.ConsumerProgressSubCommand;
import org.apache.rocketmq.tools.command.message.QueryMsgByIdSubCommand;
import org.apache.rocketmq.tools.command.message.QueryMsgByKeySubCommand;
import org.apache.rocketmq.tools.command.topic.TopicListSubCommand;
import org.apache.rocketmq.tools.command.topic.TopicRouteSubCommand;
import org.apache.rocketmq.tools.command.topic.TopicStatusSubCommand;
import org.apache.rocketmq.tools.command.topic.UpdateTopicSubCommand;

/**
 * Scenario 8, "mqadmin": runs mqadmin commands in this JVM through the real entry point
 * (MQAdminStartup.main0, exactly what the mqadmin script runs) and captures what each prints.
 *
 * <p>Options: --topic T (with messages), --group G (a consumer group with committed offsets),
 * --msg-id (an offset message id), --key (a message key of T), --new-topic X, --cluster
 * (DefaultCluster).  Commands: clusterList, topicList, topicRoute -t T, topicStatus -t T,
 * updateTopic -c CLUSTER -t X -r 4 -w 4, topicRoute -t X, consumerProgress -g G, queryMsgById -i ID
 * (plus -t T where the command declares it: 5.x requires it), queryMsgByKey -t T -k KEY, and with
 * --broker-addr A also brokerStatus -b A, each with -n NAMESRV.  Arguments are checked against the
 * command's options first, because a parse error inside MQAdminStartup ends the JVM (System.exit).  Result: commands [{name, args, stdout,
 * stderr, elapsed_ms}].
 *
 * <p>4.9.x MQAdminStartup loads ${rocketmq.home.dir}/conf/logback_tools.xml and skips the command if
 * it is missing, so a temporary home with a logback config (logging to a file) is set up first;
 * with --access-key/--secret-key it also gets conf/tools.yml, what 4.9.x mqadmin signs with.
 */
@SuppressWarnings("deprecation")
final class AdminScenario {
    /** The commands used here, to read their declared options (the same classes MQAdminStartup registers). */
    private static final Map<String, SubCommand> SUB_COMMANDS = new LinkedHashMap<>();

    static {
        for (SubCommand c : new SubCommand[] {new ClusterListSubCommand(), new TopicListSubCommand(),
            new TopicRouteSubCommand(), new TopicStatusSubCommand(), new UpdateTopicSubCommand(),
            new ConsumerProgressSubCommand(), new QueryMsgByIdSubCommand(), new QueryMsgByKeySubCommand(),
            new BrokerStatusSubCommand()}) {
            SUB_COMMANDS.put(c.commandName(), c);
        }
    }

    private AdminScenario() {
    }

    static Map<String, Object> run(Main.Args a) throws Exception {
        String ns = a.namesrv();
        String topic = a.get("topic");
        String group = a.get("group");
        String msgId = a.get("msg-id");
        String key = a.get("key");
        String newTopic = a.get("new-topic");
        String cluster = a.get("cluster", "DefaultCluster");
        String brokerAddr = a.get("broker-addr", null);
        // {name, option, value, option, value, ...}; an option the command does not declare is left
        // out (queryMsgById takes -t only in 5.x, where it is required)
        List<String[]> commands = Arrays.asList(
            new String[] {"clusterList"},
            new String[] {"topicList"},
            new String[] {"topicRoute", "-t", topic},
            new String[] {"topicStatus", "-t", topic},
            new String[] {"updateTopic", "-c", cluster, "-t", newTopic, "-r", "4", "-w", "4"},
            new String[] {"topicRoute", "-t", newTopic},
            new String[] {"consumerProgress", "-g", group},
            new String[] {"queryMsgById", "-t", topic, "-i", msgId},
            new String[] {"queryMsgByKey", "-t", topic, "-k", key});
        if (brokerAddr != null) {
            commands = new ArrayList<>(commands);
            commands.add(new String[] {"brokerStatus", "-b", brokerAddr});
        }
        List<Map<String, Object>> results = new ArrayList<>();
        for (String[] spec : commands) {
            results.add(command(ns, spec));
        }
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("commands", results);
        return r;
    }

    /**
     * Run one mqadmin command, {name, option, value, ...} plus -n NAMESRV, and return {name, args,
     * stdout, stderr, thrown, elapsed_ms}; an option the command does not declare is left out.
     */
    static Map<String, Object> command(String ns, String... spec) throws Exception {
        prepareHome();
        SubCommand sub = SUB_COMMANDS.get(spec[0]);
        Options options = sub.buildCommandlineOptions(ServerUtil.buildCommandlineOptions(new Options()));
        List<String> args = new ArrayList<>(Arrays.asList(spec[0], "-n", ns));
        for (int i = 1; i + 1 < spec.length; i += 2) {
            if (options.hasOption(spec[i].substring(1))) {
                args.add(spec[i]);
                args.add(spec[i + 1]);
            }
        }
        Main.progress("# mqadmin " + String.join(" ", args));
        return runOne(args.toArray(new String[0]), options);
    }

    static void prepareHome() throws Exception {
        if (System.getProperty("rocketmq.home.dir") != null) {
            return;
        }
        Path home = Files.createTempDirectory("rmqproxy-mqadmin-home");
        Path conf = Files.createDirectories(home.resolve("conf"));
        String xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<configuration>\n"
            + "  <appender name=\"FILE\" class=\"ch.qos.logback.core.FileAppender\">\n"
            + "    <file>" + home.resolve("tools.log") + "</file>\n"
            + "    <encoder><pattern>%d %p [%t] %c - %m%n</pattern></encoder>\n"
            + "  </appender>\n"
            + "  <root level=\"WARN\"><appender-ref ref=\"FILE\"/></root>\n</configuration>\n";
        Files.write(conf.resolve("logback_tools.xml"), xml.getBytes(StandardCharsets.UTF_8));
        if (Main.aclHook() instanceof AclClientRPCHook) {
            // 4.9.x main0 ignores its RPCHook argument and signs with conf/tools.yml (5.x uses the argument)
            SessionCredentials c = ((AclClientRPCHook) Main.aclHook()).getSessionCredentials();
            String yml = "accessKey: " + Json.write(c.getAccessKey()) + "\nsecretKey: " + Json.write(c.getSecretKey()) + "\n";
            Files.write(conf.resolve("tools.yml"), yml.getBytes(StandardCharsets.UTF_8));
        }
        System.setProperty("rocketmq.home.dir", home.toString());
    }

    private static Map<String, Object> runOne(String[] args, Options options) throws Exception {
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("name", args[0]);
        r.put("args", Arrays.asList(args));
        // ServerUtil.parseCmdLine calls System.exit on a parse error: check the arguments first
        try {
            new PosixParser().parse(options, Arrays.copyOfRange(args, 1, args.length));
        } catch (ParseException e) {
            r.put("stdout", "");
            r.put("stderr", "");
            r.put("thrown", "argument error (not run): " + e.getMessage());
            r.put("elapsed_ms", 0);
            return r;
        }
        r.putAll(runArgs(args));
        return r;
    }

    /** Run one mqadmin command line already checked against its options; {stdout, stderr, thrown, elapsed_ms}. */
    static Map<String, Object> runArgs(String[] args) throws Exception {
        prepareHome();
        Map<String, Object> r = new LinkedHashMap<>();
        ByteArrayOutputStream outBuf = new ByteArrayOutputStream();
        ByteArrayOutputStream errBuf = new ByteArrayOutputStream();
        PrintStream savedOut = System.out;
        PrintStream savedErr = System.err;
        long t0 = System.currentTimeMillis();
        String thrown = null;
        try {
            System.setOut(new PrintStream(outBuf, true, "UTF-8"));
            System.setErr(new PrintStream(errBuf, true, "UTF-8"));
            MQAdminStartup.main0(args, Main.aclHook());
        } catch (Throwable t) {
            thrown = Main.describe(t);
        } finally {
            System.out.flush();
            System.err.flush();
            System.setOut(savedOut);
            System.setErr(savedErr);
        }
        r.put("stdout", new String(outBuf.toByteArray(), StandardCharsets.UTF_8));
        r.put("stderr", new String(errBuf.toByteArray(), StandardCharsets.UTF_8));
        r.put("thrown", thrown);
        r.put("elapsed_ms", System.currentTimeMillis() - t0);
        return r;
    }
}
