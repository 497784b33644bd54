package rmqproxy.refproxy;

import java.util.HashMap;
import java.util.Map;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.remoting.protocol.subscription.SubscriptionGroupConfig;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * Make topics and consumer groups on one broker in one short JVM: what {@code mqadmin updateTopic -b}
 * and {@code updateSubGroup -b} do, without their ~4 s each of admin-client shutdown (5.x's remoting
 * client joins its service threads on the way out; this program halts instead).
 *
 * <pre>
 * java -cp ... rmqproxy.refproxy.Admin NAMESRV BROKER_ADDR topic:NAME:MESSAGE_TYPE:QUEUES group:NAME:ORDERLY:RETRY_MAX ...
 * </pre>
 *
 * <p>A topic gets QUEUES read and write queues and the attribute {@code message.type=MESSAGE_TYPE}
 * (NORMAL, FIFO, DELAY, TRANSACTION, MIXED); a group gets consumeMessageOrderly=ORDERLY and
 * retryMaxTimes=RETRY_MAX.  One line per item on stdout, "OK kind name" or "FAIL kind name: error";
 * exit 0 when all were made, 1 otherwise, 2 on bad usage.
 */
public final class Admin {
    private Admin() {
    }

    public static void main(String[] args) {
        if (args.length < 3) {
            System.out.println("usage: Admin NAMESRV BROKER_ADDR topic:NAME:TYPE:QUEUES|group:NAME:ORDERLY:RETRY_MAX ...");
            System.out.flush();
            Runtime.getRuntime().halt(2);
        }
        int rc = 0;
        DefaultMQAdminExt admin = new DefaultMQAdminExt(5000);
        admin.setNamesrvAddr(args[0]);
        admin.setInstanceName("rmqproxy-admin-" + ProcessHandle.current().pid());
        try {
            admin.start();
            for (int i = 2; i < args.length; i++) {
                String[] item = args[i].split(":");
                try {
                    if ("topic".equals(item[0]) && item.length == 4) {
                        TopicConfig topic = new TopicConfig(item[1], Integer.parseInt(item[3]), Integer.parseInt(item[3]));
                        Map<String, String> attributes = new HashMap<>();
                        attributes.put("+message.type", item[2]);
                        topic.setAttributes(attributes);
                        admin.createAndUpdateTopicConfig(args[1], topic);
                    } else if ("group".equals(item[0]) && item.length == 4) {
                        SubscriptionGroupConfig group = new SubscriptionGroupConfig();
                        group.setGroupName(item[1]);
                        group.setConsumeMessageOrderly(Boolean.parseBoolean(item[2]));
                        group.setRetryMaxTimes(Integer.parseInt(item[3]));
                        admin.createAndUpdateSubscriptionGroupConfig(args[1], group);
                    } else {
                        throw new IllegalArgumentException("not topic:NAME:TYPE:QUEUES or group:NAME:ORDERLY:RETRY_MAX");
                    }
                    System.out.println("OK " + item[0] + " " + (item.length > 1 ? item[1] : ""));
                } catch (Exception e) {
                    rc = 1;
                    System.out.println("FAIL " + args[i] + ": " + e);
                }
            }
        } catch (Exception e) {
            rc = 1;
            System.out.println("FAIL start: " + e);
        }
        System.out.flush();
        Runtime.getRuntime().halt(rc);
    }
}
