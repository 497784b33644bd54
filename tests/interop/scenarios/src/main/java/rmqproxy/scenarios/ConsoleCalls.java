package rmqproxy.scenarios;

import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.LinkedHashMap;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * The adminshell's "console" op: the admin calls the RocketMQ console (rocketmq-dashboard 2.1.0) makes,
 * on an admin client built as its MQAdminFactory builds one with the default settings: a
 * DefaultMQAdminExt with its default 5 s timeout, an admin group of its own, an instance name of the
 * current time, and {@code setVipChannelEnabled(true)} (the console's {@code isVIPChannel} is empty by
 * default and read as true), so every broker call goes to the broker address's port - 2 (the broker's
 * "fast" port, MixAll.brokerVIPChannel).
 *
 * <p>Request {"op":"console","call":NAME, ...fields, "vip":true|false}; the reply is the call's result
 * reduced to plain maps (the body classes live in other packages on 4.9.x and 5.x, so they are only
 * reached through {@code var} and their getters), plus "channels": the addresses the admin client
 * holds connections to (its remoting client's channel table), which shows where the VIP calls went.
 * A call that throws is answered {thrown, error_broker_code, error_broker_remark, channels}.
 *
 * <p>Calls: clusterInfo, runtimeStats {addr}, collectBroker (the dashboard's per-minute broker TPS
 * collector, DashboardCollectTask.collectBroker), topicList, topicRoute {topic}, topicStats {topic},
 * topicStatsOfBroker {addr, topic} (5.x), topicConfig {addr, topic}, allTopicConfig {addr}, consumeByWho {topic}, consumeStats {group, topic?},
 * consumeStatsOfBroker {addr, group}, consumerConnection {group}, consumerRunningInfo {group, client_id},
 * subscriptionGroup {addr, group}, allSubscriptionGroups {addr}, producerConnection {group, topic},
 * queryMessageByKey {topic, key}, viewMessage {topic, msg_id}, viewMessageAsConsole {topic, msg_id}
 * (MQAdminExtImpl.viewMessage of the console: a unique-key query per cluster of the topic),
 * brokerConfig {addr}, brokerStatsData {addr, stats_name, stats_key} (the topic collector's call).
 */
final class ConsoleCalls {
    private static final Map<Boolean, DefaultMQAdminExt> ADMINS = new LinkedHashMap<>();
    private static int adminIndex;

    private ConsoleCalls() {
    }

    static synchronized DefaultMQAdminExt admin(String ns, boolean vip) throws Exception {
        DefaultMQAdminExt admin = ADMINS.get(vip);
        if (admin == null) {
            admin = new DefaultMQAdminExt(Main.aclHook());
            admin.setAdminExtGroup(admin.getAdminExtGroup() + "_" + adminIndex++);
            admin.setVipChannelEnabled(vip);
            admin.setInstanceName(Long.toString(System.currentTimeMillis()) + (vip ? "" : "-novip"));
            admin.setNamesrvAddr(ns);
            admin.start();
            ADMINS.put(vip, admin);
        }
        return admin;
    }

    static synchronized void shutdown() {
        for (DefaultMQAdminExt a : ADMINS.values()) {
            a.shutdown();
        }
        ADMINS.clear();
    }

    private static String str(Map<?, ?> req, String key) {
        Object v = req.get(key);
        if (v == null) {
            throw new IllegalArgumentException("console call needs \"" + key + "\"");
        }
        return String.valueOf(v);
    }

    static Map<String, Object> call(String ns, Map<?, ?> req) throws Exception {
        boolean vip = !"false".equals(String.valueOf(req.get("vip")));
        DefaultMQAdminExt admin = admin(ns, vip);
        String name = str(req, "call");
        Map<String, Object> r = new LinkedHashMap<>();
        long start = System.nanoTime();
        try {
            r.put("result", run(admin, name, req));
        } catch (Exception e) {
            r.put("thrown", Main.describe(e));
            r.putAll(Main.brokerAnswer(e));
        }
        r.put("elapsed_ms", (System.nanoTime() - start) / 1_000_000);
        r.put("channels", channels(admin));
        return r;
    }

    private static Object run(DefaultMQAdminExt admin, String name, Map<?, ?> req) throws Exception {
        switch (name) {
            case "clusterInfo":
                return clusterInfo(admin);
            case "runtimeStats":
                return new TreeMap<>(admin.fetchBrokerRuntimeStats(str(req, "addr")).getTable());
            case "collectBroker":
                return collectBroker(admin);
            case "topicList":
                return new ArrayList<>(new TreeSet<>(admin.fetchAllTopicList().getTopicList()));
            case "topicRoute":
                return route(admin, str(req, "topic"));
            case "topicStats":
                return topicStats(admin.examineTopicStats(str(req, "topic")));
            case "topicStatsOfBroker":
                return topicStats(invoke(admin, "examineTopicStats", str(req, "addr"), str(req, "topic")));
            case "topicConfig": {
                Object config = invoke(admin, "examineTopicConfig", str(req, "addr"), str(req, "topic"));
                return config == null ? null : topicConfig(config);
            }
            case "allTopicConfig": {
                var wrapper = admin.getAllTopicConfig(str(req, "addr"), 10000L);
                return new ArrayList<>(new TreeSet<>(wrapper.getTopicConfigTable().keySet()));
            }
            case "consumeByWho":
                return new ArrayList<>(new TreeSet<>(admin.queryTopicConsumeByWho(str(req, "topic")).getGroupList()));
            case "consumeStats": {
                Object topic = req.get("topic");
                return consumeStats(topic == null ? admin.examineConsumeStats(str(req, "group"))
                    : admin.examineConsumeStats(str(req, "group"), String.valueOf(topic)));
            }
            case "consumeStatsOfBroker":
                // the console's consumer detail (queryConsumeStatsListByGroupName): one broker, 3 s; 5.x only
                return consumeStats(invoke(admin, "examineConsumeStats", str(req, "addr"), str(req, "group"), null, 3000L));
            case "consumerConnection":
                return consumerConnection(admin.examineConsumerConnectionInfo(str(req, "group")));
            case "consumerRunningInfo": {
                var info = admin.getConsumerRunningInfo(str(req, "group"), str(req, "client_id"), false);
                Map<String, Object> m = new LinkedHashMap<>();
                List<Object> subs = new ArrayList<>();
                for (var s : info.getSubscriptionSet()) {
                    subs.add(s.getTopic());
                }
                m.put("subscriptions", subs);
                m.put("queues", info.getMqTable().size());
                Map<String, Object> props = new TreeMap<>();
                for (var e : info.getProperties().entrySet()) {
                    props.put(String.valueOf(e.getKey()), String.valueOf(e.getValue()));
                }
                m.put("properties", props);
                return m;
            }
            case "subscriptionGroup": {
                var config = admin.examineSubscriptionGroupConfig(str(req, "addr"), str(req, "group"));
                if (config == null) {
                    return null;
                }
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("groupName", config.getGroupName());
                m.put("consumeEnable", config.isConsumeEnable());
                m.put("consumeBroadcastEnable", config.isConsumeBroadcastEnable());
                m.put("retryQueueNums", config.getRetryQueueNums());
                m.put("retryMaxTimes", config.getRetryMaxTimes());
                m.put("brokerId", config.getBrokerId());
                return m;
            }
            case "allSubscriptionGroups": {
                var wrapper = admin.getAllSubscriptionGroup(str(req, "addr"), 30000L);
                return new ArrayList<>(new TreeSet<>(wrapper.getSubscriptionGroupTable().keySet()));
            }
            case "producerConnection": {
                var conn = admin.examineProducerConnectionInfo(str(req, "group"), str(req, "topic"));
                List<Object> clients = new ArrayList<>();
                for (var c : conn.getConnectionSet()) {
                    clients.add(connection(c));
                }
                return clients;
            }
            case "queryMessageByKey": {
                // MessageServiceImpl.queryMessageByTopicAndKey: 64 at most, from 0 to now
                var result = admin.queryMessage(str(req, "topic"), str(req, "key"), 64, 0, System.currentTimeMillis());
                List<Object> msgs = new ArrayList<>();
                for (MessageExt m : result.getMessageList()) {
                    msgs.add(message(m));
                }
                return msgs;
            }
            case "viewMessage": {
                MessageExt m = admin.viewMessage(str(req, "topic"), str(req, "msg_id"));
                return m == null ? null : message(m);
            }
            case "viewMessageAsConsole":
                return viewMessageAsConsole(admin, str(req, "topic"), str(req, "msg_id"));
            case "brokerConfig": {
                Map<String, Object> props = new TreeMap<>();
                for (var e : admin.getBrokerConfig(str(req, "addr")).entrySet()) {
                    props.put(String.valueOf(e.getKey()), String.valueOf(e.getValue()));
                }
                return props;
            }
            case "brokerStatsData": {
                var data = admin.viewBrokerStatsData(str(req, "addr"), str(req, "stats_name"), str(req, "stats_key"));
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("minute", statsItem(data.getStatsMinute()));
                m.put("hour", statsItem(data.getStatsHour()));
                m.put("day", statsItem(data.getStatsDay()));
                return m;
            }
            default:
                throw new IllegalArgumentException("unknown console call " + name);
        }
    }

    private static Map<String, Object> clusterInfo(DefaultMQAdminExt admin) throws Exception {
        var info = admin.examineBrokerClusterInfo();
        Map<String, Object> clusters = new TreeMap<>();
        for (var e : info.getClusterAddrTable().entrySet()) {
            clusters.put(e.getKey(), new ArrayList<>(new TreeSet<>(e.getValue())));
        }
        Map<String, Object> brokers = new TreeMap<>();
        for (var e : info.getBrokerAddrTable().entrySet()) {
            Map<String, Object> b = new LinkedHashMap<>();
            b.put("cluster", e.getValue().getCluster());
            Map<String, Object> addrs = new TreeMap<>();
            for (var a : e.getValue().getBrokerAddrs().entrySet()) {
                addrs.put(String.valueOf(a.getKey()), a.getValue());
            }
            b.put("addrs", addrs);
            brokers.put(e.getKey(), b);
        }
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("clusters", clusters);
        m.put("brokers", brokers);
        return m;
    }

    /**
     * DashboardCollectTask.collectBroker as the console runs it every minute: for every broker address
     * of the cluster info, fetchBrokerRuntimeStats and the average of the figures of "getTotalTps"
     * (split on " ", each a BigDecimal). Also the first figure of "getTotalTps" and "putTps" parsed as
     * a double, as the console's pages read them. A missing field or a figure that is no number
     * throws here as it does in the console.
     */
    private static Map<String, Object> collectBroker(DefaultMQAdminExt admin) throws Exception {
        var info = admin.examineBrokerClusterInfo();
        Map<String, Object> out = new TreeMap<>();
        for (var broker : info.getBrokerAddrTable().entrySet()) {
            for (var addr : broker.getValue().getBrokerAddrs().entrySet()) {
                Map<String, String> table = admin.fetchBrokerRuntimeStats(addr.getValue()).getTable();
                String[] tpsArray = table.get("getTotalTps").split(" ");
                BigDecimal totalTps = new BigDecimal(0);
                for (String tps : tpsArray) {
                    totalTps = totalTps.add(new BigDecimal(tps));
                }
                BigDecimal averageTps = totalTps.divide(new BigDecimal(tpsArray.length), 5, BigDecimal.ROUND_HALF_UP);
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("key", broker.getKey() + ":" + addr.getKey());
                m.put("averageTps", averageTps.toString());
                m.put("getTotalTps", Double.parseDouble(table.get("getTotalTps").split(" ")[0]));
                m.put("putTps", Double.parseDouble(table.get("putTps").split(" ")[0]));
                out.put(addr.getValue(), m);
            }
        }
        return out;
    }

    private static Map<String, Object> route(DefaultMQAdminExt admin, String topic) throws Exception {
        var route = admin.examineTopicRouteInfo(topic);
        Map<String, Object> brokers = new TreeMap<>();
        for (var b : route.getBrokerDatas()) {
            Map<String, Object> addrs = new TreeMap<>();
            for (var a : b.getBrokerAddrs().entrySet()) {
                addrs.put(String.valueOf(a.getKey()), a.getValue());
            }
            brokers.put(b.getBrokerName(), addrs);
        }
        List<Object> queues = new ArrayList<>();
        for (var q : route.getQueueDatas()) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("broker", q.getBrokerName());
            m.put("read", q.getReadQueueNums());
            m.put("write", q.getWriteQueueNums());
            m.put("perm", q.getPerm());
            queues.add(m);
        }
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("brokers", brokers);
        m.put("queues", queues);
        return m;
    }

    private static List<Object> topicStats(Object stats) throws Exception {
        List<Object> queues = new ArrayList<>();
        for (Map.Entry<?, ?> e : ((Map<?, ?>) stats.getClass().getMethod("getOffsetTable").invoke(stats)).entrySet()) {
            Map<String, Object> q = queue((org.apache.rocketmq.common.message.MessageQueue) e.getKey());
            Object o = e.getValue();
            q.put("min", o.getClass().getMethod("getMinOffset").invoke(o));
            q.put("max", o.getClass().getMethod("getMaxOffset").invoke(o));
            q.put("last_update", o.getClass().getMethod("getLastUpdateTimestamp").invoke(o));
            queues.add(q);
        }
        return queues;
    }

    private static Map<String, Object> topicConfig(Object config) throws Exception {
        Map<String, Object> m = new LinkedHashMap<>();
        for (String getter : new String[] {"getTopicName", "getReadQueueNums", "getWriteQueueNums", "getPerm"}) {
            m.put(getter.substring(3, 4).toLowerCase() + getter.substring(4), config.getClass().getMethod(getter).invoke(config));
        }
        return m;
    }

    private static Map<String, Object> queue(org.apache.rocketmq.common.message.MessageQueue mq) {
        Map<String, Object> q = new LinkedHashMap<>();
        q.put("topic", mq.getTopic());
        q.put("broker", mq.getBrokerName());
        q.put("queue", mq.getQueueId());
        return q;
    }

    private static Map<String, Object> consumeStats(Object statsObject) throws Exception {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("tps", statsObject.getClass().getMethod("getConsumeTps").invoke(statsObject));
        m.put("diff_total", statsObject.getClass().getMethod("computeTotalDiff").invoke(statsObject));
        Map<?, ?> table = (Map<?, ?>) statsObject.getClass().getMethod("getOffsetTable").invoke(statsObject);
        List<Object> queues = new ArrayList<>();
        for (Map.Entry<?, ?> e : table.entrySet()) {
            Map<String, Object> q = queue((org.apache.rocketmq.common.message.MessageQueue) e.getKey());
            Object w = e.getValue();
            q.put("broker_offset", w.getClass().getMethod("getBrokerOffset").invoke(w));
            q.put("consumer_offset", w.getClass().getMethod("getConsumerOffset").invoke(w));
            q.put("last_timestamp", w.getClass().getMethod("getLastTimestamp").invoke(w));
            queues.add(q);
        }
        m.put("queues", queues);
        return m;
    }

    private static Map<String, Object> connection(Object c) throws Exception {
        Map<String, Object> m = new LinkedHashMap<>();
        for (String getter : new String[] {"getClientId", "getClientAddr", "getLanguage", "getVersion"}) {
            Object v = c.getClass().getMethod(getter).invoke(c);
            m.put(getter.substring(3, 4).toLowerCase() + getter.substring(4), v instanceof Number ? v : String.valueOf(v));
        }
        return m;
    }

    private static Map<String, Object> consumerConnection(Object conn) throws Exception {
        Map<String, Object> m = new LinkedHashMap<>();
        List<Object> clients = new ArrayList<>();
        for (Object c : (Iterable<?>) conn.getClass().getMethod("getConnectionSet").invoke(conn)) {
            clients.add(connection(c));
        }
        m.put("clients", clients);
        Map<String, Object> subs = new TreeMap<>();
        for (Map.Entry<?, ?> e : ((Map<?, ?>) conn.getClass().getMethod("getSubscriptionTable").invoke(conn)).entrySet()) {
            Object s = e.getValue();
            subs.put(String.valueOf(e.getKey()), String.valueOf(s.getClass().getMethod("getSubString").invoke(s)));
        }
        m.put("subscriptions", subs);
        for (String getter : new String[] {"getConsumeType", "getMessageModel", "getConsumeFromWhere"}) {
            m.put(getter.substring(3, 4).toLowerCase() + getter.substring(4), String.valueOf(conn.getClass().getMethod(getter).invoke(conn)));
        }
        return m;
    }

    private static Map<String, Object> message(MessageExt msg) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("msg_id", msg.getMsgId());
        m.put("uniq_key", msg.getProperty("UNIQ_KEY"));
        Object offsetId = null;
        try {
            offsetId = msg.getClass().getMethod("getOffsetMsgId").invoke(msg);
        } catch (ReflectiveOperationException e) {
            // a plain MessageExt (queried by its offset id): its msgId is that id
        }
        m.put("offset_msg_id", offsetId);
        m.put("topic", msg.getTopic());
        m.put("keys", msg.getKeys());
        m.put("tags", msg.getTags());
        m.put("queue", msg.getQueueId());
        m.put("queue_offset", msg.getQueueOffset());
        m.put("store_host", String.valueOf(msg.getStoreHost()));
        m.put("body", msg.getBody() == null ? null : new String(msg.getBody(), StandardCharsets.UTF_8));
        return m;
    }

    /**
     * The console's MQAdminExtImpl.viewMessage (rocketmq-dashboard 2.1.0): for each cluster of the
     * topic (getTopicClusterList), MQAdminImpl.queryMessage(cluster, topic, msgId, 32, 0,
     * Long.MAX_VALUE, true), the first message found; called by reflection as the console calls it.
     */
    private static Object viewMessageAsConsole(DefaultMQAdminExt admin, String topic, String msgId) throws Exception {
        Object impl = field(admin, "defaultMQAdminExtImpl");
        Object instance = field(impl, "mqClientInstance");
        Object mqAdminImpl = instance.getClass().getMethod("getMQAdminImpl").invoke(instance);
        Method query = null;
        for (Method m : mqAdminImpl.getClass().getDeclaredMethods()) {
            if (m.getName().equals("queryMessage") && m.getParameterCount() == 7) {
                query = m;
            }
        }
        if (query == null) {
            throw new IllegalStateException("MQAdminImpl has no queryMessage(cluster, topic, key, max, begin, end, uniq)");
        }
        query.setAccessible(true);
        @SuppressWarnings("unchecked")
        java.util.Set<String> clusters = (java.util.Set<String>) invoke(admin, "getTopicClusterList", topic);
        List<String> names = new ArrayList<>(clusters == null || clusters.isEmpty() ? List.of("") : clusters);
        for (String cluster : names) {
            Object qr = query.invoke(mqAdminImpl, cluster, topic, msgId, 32, 0L, Long.MAX_VALUE, true);
            if (qr != null) {
                @SuppressWarnings("unchecked")
                List<MessageExt> list = (List<MessageExt>) qr.getClass().getMethod("getMessageList").invoke(qr);
                if (list != null && !list.isEmpty()) {
                    return message(list.get(0));
                }
            }
        }
        return null;
    }

    private static Map<String, Object> statsItem(Object item) throws Exception {
        Map<String, Object> m = new LinkedHashMap<>();
        for (String getter : new String[] {"getSum", "getTps", "getAvgpt"}) {
            m.put(getter.substring(3).toLowerCase(), item.getClass().getMethod(getter).invoke(item));
        }
        return m;
    }

    /** A public method of {@code target} by name and argument count (for what only some lines have). */
    private static Object invoke(Object target, String name, Object... args) throws Exception {
        for (Method m : target.getClass().getMethods()) {
            if (m.getName().equals(name) && m.getParameterCount() == args.length) {
                Class<?>[] types = m.getParameterTypes();
                boolean fits = true;
                for (int i = 0; i < args.length && fits; i++) {
                    Class<?> t = types[i];
                    fits = args[i] == null ? !t.isPrimitive()
                        : t.isInstance(args[i]) || (t == long.class && args[i] instanceof Long)
                            || (t == int.class && args[i] instanceof Integer) || (t == boolean.class && args[i] instanceof Boolean);
                }
                if (fits) {
                    try {
                        return m.invoke(target, args);
                    } catch (java.lang.reflect.InvocationTargetException e) {
                        Throwable cause = e.getCause();
                        if (cause instanceof Exception) {
                            throw (Exception) cause;
                        }
                        throw e;
                    }
                }
            }
        }
        throw new UnsupportedOperationException(target.getClass().getSimpleName() + " has no " + name + " for "
            + args.length + " arguments in this client version");
    }

    private static Object field(Object target, String name) throws Exception {
        for (Class<?> c = target.getClass(); c != null; c = c.getSuperclass()) {
            try {
                Field f = c.getDeclaredField(name);
                f.setAccessible(true);
                return f.get(target);
            } catch (NoSuchFieldException e) {
                // the superclass may declare it
            }
        }
        throw new NoSuchFieldException(target.getClass().getName() + "." + name);
    }

    /** The addresses the admin client's remoting client has channels to (sorted). */
    static List<String> channels(DefaultMQAdminExt admin) {
        try {
            Object impl = field(admin, "defaultMQAdminExtImpl");
            Object instance = field(impl, "mqClientInstance");
            Object api = instance.getClass().getMethod("getMQClientAPIImpl").invoke(instance);
            Object remoting = api.getClass().getMethod("getRemotingClient").invoke(api);
            Map<?, ?> table = (Map<?, ?>) field(remoting, "channelTables");
            List<String> out = new ArrayList<>();
            for (Object k : table.keySet()) {
                out.add(String.valueOf(k));
            }
            out.sort(null);
            return out;
        } catch (Exception e) {
            List<String> out = new ArrayList<>();
            out.add("unknown: " + Main.describe(e));
            return out;
        }
    }
}
