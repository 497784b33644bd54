/*
 * rmqproxy interop oracle.
 *
 * A long-running helper that answers questions about the Apache RocketMQ remoting wire format by
 * calling the REAL RocketMQ Java classes (rocketmq-remoting / -common / -client from Maven Central,
 * version chosen at build time with -Drocketmq.version). tests/interop/oracle.py writes one JSON
 * request per line on stdin ({"op": NAME, ...args}) and reads one JSON answer per line on stdout;
 * failures are answered as {"error": "<class>: <message>"} and the process keeps running.
 * Bytes travel as lowercase hex strings. The op list is in dispatch() below and in
 * tests/interop/oracle.py.
 *
 * One source for both client lines: protocol classes moved from org.apache.rocketmq.common.protocol.*
 * (4.9) to org.apache.rocketmq.remoting.protocol.* (5.x), and 5.x switched its JSON library from
 * fastjson to fastjson2 (5.4.0). So headers, bodies and helpers are resolved by simple class name
 * over a list of candidate packages and driven by reflection; only classes whose package and
 * signatures are identical in both lines (RemotingCommand, MessageDecoder, Message*, MQVersion,
 * netty ByteBuf) are referenced directly. This file contains no code copied from RocketMQ.
 *
 * stdout carries answers only: System.out is pointed at stderr before any RocketMQ class loads,
 * and answers go to a private stream on file descriptor 1.
 */
package rmqproxy.oracle;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Array;
import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageId;
import org.apache.rocketmq.remoting.CommandCustomHeader;
import org.apache.rocketmq.remoting.protocol.LanguageCode;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.RemotingSerializable;
import org.apache.rocketmq.remoting.protocol.SerializeType;

public final class Oracle {
    /** Where protocol classes live: 5.x packages first, then 4.9.x. Simple names are unique per line. */
    private static final String[] PACKAGES = {
        "org.apache.rocketmq.remoting.protocol.header",
        "org.apache.rocketmq.remoting.protocol.header.namesrv",
        "org.apache.rocketmq.remoting.protocol.body",
        "org.apache.rocketmq.remoting.protocol.heartbeat",
        "org.apache.rocketmq.remoting.protocol.route",
        "org.apache.rocketmq.remoting.protocol.admin",
        "org.apache.rocketmq.remoting.protocol.filter",
        "org.apache.rocketmq.remoting.protocol.subscription",
        "org.apache.rocketmq.remoting.protocol.topic",
        "org.apache.rocketmq.remoting.protocol.statictopic",
        "org.apache.rocketmq.remoting.protocol",
        "org.apache.rocketmq.remoting.rpc",
        "org.apache.rocketmq.common.protocol.header",
        "org.apache.rocketmq.common.protocol.header.namesrv",
        "org.apache.rocketmq.common.protocol.body",
        "org.apache.rocketmq.common.protocol.heartbeat",
        "org.apache.rocketmq.common.protocol.route",
        "org.apache.rocketmq.common.protocol.topic",
        "org.apache.rocketmq.common.protocol",
        "org.apache.rocketmq.common.admin",
        "org.apache.rocketmq.common.filter",
        "org.apache.rocketmq.common.subscription",
        "org.apache.rocketmq.common.message",
        "org.apache.rocketmq.common",
    };

    /** NettyDecoder's default -Dcom.rocketmq.remoting.frameMaxLength (same in 4.9.8 and 5.x). */
    private static final int FRAME_MAX_LENGTH =
        Integer.parseInt(System.getProperty("com.rocketmq.remoting.frameMaxLength", "16777216"));

    private static final Map<String, Class<?>> CLASS_CACHE = new HashMap<>();

    private Oracle() {
    }

    public static void main(String[] args) throws Exception {
        PrintStream answers = new PrintStream(new FileOutputStream(FileDescriptor.out), false, "UTF-8");
        System.setOut(System.err);
        boolean debug = System.getenv("RMQ_ORACLE_DEBUG") != null;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.trim().isEmpty()) {
                continue;
            }
            String answer;
            try {
                Object req = Json.parse(line);
                if (!(req instanceof Map)) {
                    throw new IllegalArgumentException("request must be a JSON object");
                }
                @SuppressWarnings("unchecked")
                Map<String, Object> r = (Map<String, Object>) req;
                answer = Json.write(dispatch(r));
            } catch (Throwable t) {
                Throwable c = t;
                while (c instanceof InvocationTargetException && c.getCause() != null) {
                    c = c.getCause();
                }
                if (debug) {
                    c.printStackTrace(System.err);
                }
                Map<String, Object> err = new LinkedHashMap<>();
                err.put("error", c.getClass().getName() + ": " + c.getMessage());
                answer = Json.write(err);
            }
            answers.print(answer);
            answers.print('\n');
            answers.flush();
        }
    }

    private static Map<String, Object> dispatch(Map<String, Object> r) throws Exception {
        String op = str(r, "op", null);
        if (op == null) {
            throw new IllegalArgumentException("missing op");
        }
        switch (op) {
            case "ping":
                return ping();
            case "encode_command":
                return encodeCommand(r);
            case "decode_command":
                return decodeCommand(r);
            case "encode_message":
                return encodeMessage(r);
            case "decode_messages":
                return decodeMessages(r);
            case "encode_batch":
                return encodeBatch(r);
            case "decode_batch":
                return decodeBatch(r);
            case "properties_to_string":
                return propertiesToString(r);
            case "string_to_properties":
                return stringToProperties(r);
            case "create_offset_msg_id":
                return createOffsetMsgId(r);
            case "decode_msg_id":
                return decodeMsgId(r);
            case "tag_hash":
                return obj("hash", str(r, "tag", null).hashCode());
            case "build_subscription":
                return buildSubscription(r);
            case "encode_body":
                return encodeBody(r);
            case "decode_body":
                return decodeBody(r);
            default:
                throw new IllegalArgumentException("unknown op " + op);
        }
    }

    // ================================================================ ops

    private static Map<String, Object> ping() throws Exception {
        Map<String, Object> m = obj("ok", true);
        m.put("version", MQVersion.getVersionDesc(MQVersion.CURRENT_VERSION));
        m.put("version_ordinal", MQVersion.CURRENT_VERSION);
        m.put("json_library", jsonClass().getName());
        return m;
    }

    /** Build a RemotingCommand as broker/client code does and return NettyEncoder's exact bytes. */
    private static Map<String, Object> encodeCommand(Map<String, Object> r) throws Exception {
        int code = intv(r, "code");
        int flag = r.get("flag") == null ? 0 : intv(r, "flag");
        String headerClass = str(r, "header_class", null);
        Map<String, Object> fields = map(r, "fields");
        Class<? extends CommandCustomHeader> hc = headerClass == null ? null : headerClass(headerClass);

        RemotingCommand cmd;
        CommandCustomHeader header = null;
        if ((flag & 1) != 0) {
            // Broker style: createResponseCommand(HeaderClass.class), fill readCustomHeader(), setCode.
            cmd = RemotingCommand.createResponseCommand(hc);
            header = cmd.readCustomHeader();
            if (header != null) {
                setFields(header, fields);
            }
            cmd.setCode(code);
        } else {
            if (hc != null) {
                header = hc.getDeclaredConstructor().newInstance();
                setFields(header, fields);
            }
            cmd = RemotingCommand.createRequestCommand(code, header);
        }
        if (header == null && fields != null && !fields.isEmpty()) {
            throw new IllegalArgumentException("fields given without header_class");
        }
        if (r.containsKey("opaque")) {
            cmd.setOpaque(intv(r, "opaque"));
        }
        cmd.setFlag(flag);
        if (r.containsKey("version")) {
            cmd.setVersion(intv(r, "version"));
        }
        if (r.containsKey("language")) {
            String lang = str(r, "language", null);
            cmd.setLanguage(lang == null ? null : LanguageCode.valueOf(lang));
        } else {
            cmd.setLanguage(LanguageCode.JAVA);
        }
        cmd.setRemark(str(r, "remark", null));
        cmd.setSerializeTypeCurrentRPC(SerializeType.valueOf(str(r, "serialize", "JSON")));
        byte[] body = hexArg(r, "body_hex");
        if (body != null) {
            cmd.setBody(body);
        }
        Map<String, Object> extra = map(r, "extra_ext");
        if (extra != null) {
            for (Map.Entry<String, Object> e : extra.entrySet()) {
                cmd.addExtField(e.getKey(), e.getValue() == null ? null : scalarText(e.getValue()));
            }
        }
        // NettyEncoder.encode: fastEncodeHeader(out) then the body.
        ByteBuf out = Unpooled.buffer();
        cmd.fastEncodeHeader(out);
        if (cmd.getBody() != null) {
            out.writeBytes(cmd.getBody());
        }
        byte[] frame = new byte[out.readableBytes()];
        out.readBytes(frame);
        return obj("frame_hex", hex(frame));
    }

    /** Decode a whole frame (length prefix included) as NettyDecoder does. */
    private static Map<String, Object> decodeCommand(Map<String, Object> r) throws Exception {
        byte[] frame = hexArg(r, "frame_hex");
        if (frame == null || frame.length < 4) {
            throw new IllegalArgumentException("frame shorter than the 4-byte length field");
        }
        long total = ByteBuffer.wrap(frame).getInt() & 0xFFFFFFFFL;
        if ((int) total < 0 || total + 4 > FRAME_MAX_LENGTH) {
            // LengthFieldBasedFrameDecoder(FRAME_MAX_LENGTH, 0, 4, 0, 4) rejects it.
            throw new IllegalArgumentException("TooLongFrameException: frame length " + (int) total
                + " (+4) exceeds " + FRAME_MAX_LENGTH);
        }
        if (total > frame.length - 4) {
            throw new IllegalArgumentException("incomplete frame: length field " + total + ", have "
                + (frame.length - 4));
        }
        RemotingCommand cmd = RemotingCommand.decode(Unpooled.wrappedBuffer(frame, 4, (int) total));
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("code", cmd.getCode());
        m.put("language", cmd.getLanguage() == null ? null : cmd.getLanguage().name());
        m.put("version", cmd.getVersion());
        m.put("opaque", cmd.getOpaque());
        m.put("flag", cmd.getFlag());
        m.put("remark", cmd.getRemark());
        m.put("ext_fields", cmd.getExtFields() == null ? null : new LinkedHashMap<>(cmd.getExtFields()));
        m.put("body_hex", cmd.getBody() == null ? null : hex(cmd.getBody()));
        m.put("serialize", cmd.getSerializeTypeCurrentRPC() == null ? null : cmd.getSerializeTypeCurrentRPC().name());
        if (frame.length - 4 > total) {
            m.put("trailing_bytes", frame.length - 4 - total);
        }
        String headerClass = str(r, "header_class", null);
        if (headerClass == null) {
            m.put("header", null);
        } else {
            Class<? extends CommandCustomHeader> hc = headerClass(headerClass);
            try {
                CommandCustomHeader h = cmd.decodeCommandCustomHeader(hc);
                m.put("header", h == null ? null : headerFields(h));
            } catch (Exception e) {
                m.put("header", null);
                m.put("header_error", e.getMessage());
            }
        }
        return m;
    }

    /** MessageDecoder.encode(MessageExt, false): one stored record. */
    private static Map<String, Object> encodeMessage(Map<String, Object> r) throws Exception {
        MessageExt m = new MessageExt();
        m.setTopic(str(r, "topic", ""));
        m.setQueueId(intOr(r, "queue_id", 0));
        m.setFlag(intOr(r, "flag", 0));
        m.setQueueOffset(longOr(r, "queue_offset", 0));
        m.setCommitLogOffset(longOr(r, "commit_log_offset", 0));
        m.setSysFlag(intOr(r, "sys_flag", 0));
        m.setBornTimestamp(longOr(r, "born_timestamp", 0));
        m.setBornHost(hostArg(r, "born_host"));
        m.setStoreTimestamp(longOr(r, "store_timestamp", 0));
        m.setStoreHost(hostArg(r, "store_host"));
        m.setReconsumeTimes(intOr(r, "reconsume_times", 0));
        m.setPreparedTransactionOffset(longOr(r, "prepared_transaction_offset", 0));
        m.setBodyCRC(intOr(r, "body_crc", 0));
        m.setStoreSize(intOr(r, "store_size", 0));
        byte[] body = hexArg(r, "body_hex");
        m.setBody(body == null ? new byte[0] : body);
        applyProperties(m, r);
        return obj("hex", hex(MessageDecoder.encode(m, false)));
    }

    /**
     * MessageDecoder.decodes(ByteBuffer, readBody) is a loop over decode(buf, readBody, true, true)
     * that stops at the first record that fails; this is the same loop with decompress (and, 5.x
     * only, checkCRC) selectable.
     */
    private static Map<String, Object> decodeMessages(Map<String, Object> r) throws Exception {
        byte[] data = hexArg(r, "hex");
        boolean readBody = boolOr(r, "read_body", true);
        boolean decompress = boolOr(r, "decompress", false);
        boolean checkCrc = boolOr(r, "check_crc", false);
        Method crcDecode = null;
        if (checkCrc) {
            try {
                crcDecode = MessageDecoder.class.getMethod("decode", ByteBuffer.class, boolean.class,
                    boolean.class, boolean.class, boolean.class, boolean.class);
            } catch (NoSuchMethodException e) {
                throw new UnsupportedOperationException("MessageDecoder of this version has no checkCRC decode");
            }
        }
        ByteBuffer buf = ByteBuffer.wrap(data == null ? new byte[0] : data);
        List<Object> out = new ArrayList<>();
        boolean stopped = false;
        while (buf.hasRemaining()) {
            MessageExt m = crcDecode != null
                ? (MessageExt) crcDecode.invoke(null, buf, readBody, decompress, true, false, true)
                : MessageDecoder.decode(buf, readBody, decompress, true);
            if (m == null) {
                stopped = true;
                break;
            }
            out.add(messageView(m));
        }
        Map<String, Object> ans = obj("messages", out);
        ans.put("stopped_on_error", stopped);
        return ans;
    }

    private static Map<String, Object> encodeBatch(Map<String, Object> r) throws Exception {
        List<Message> msgs = new ArrayList<>();
        for (Object o : list(r, "messages")) {
            @SuppressWarnings("unchecked")
            Map<String, Object> a = (Map<String, Object>) o;
            Message m = new Message();
            m.setTopic(str(a, "topic", ""));
            m.setFlag(intOr(a, "flag", 0));
            byte[] body = hexArg(a, "body_hex");
            m.setBody(body == null ? new byte[0] : body);
            applyProperties(m, a);
            msgs.add(m);
        }
        return obj("hex", hex(MessageDecoder.encodeMessages(msgs)));
    }

    private static Map<String, Object> decodeBatch(Map<String, Object> r) throws Exception {
        byte[] data = hexArg(r, "hex");
        List<Object> out = new ArrayList<>();
        for (Message m : MessageDecoder.decodeMessages(ByteBuffer.wrap(data == null ? new byte[0] : data))) {
            Map<String, Object> v = new LinkedHashMap<>();
            v.put("flag", m.getFlag());
            v.put("body_hex", m.getBody() == null ? null : hex(m.getBody()));
            v.put("properties", m.getProperties() == null ? null : new LinkedHashMap<>(m.getProperties()));
            out.add(v);
        }
        return obj("messages", out);
    }

    private static Map<String, Object> propertiesToString(Map<String, Object> r) {
        Map<String, String> props = new LinkedHashMap<>();
        for (String[] kv : pairs(r, "properties")) {
            props.put(kv[0], kv[1]);
        }
        return obj("text", MessageDecoder.messageProperties2String(props));
    }

    private static Map<String, Object> stringToProperties(Map<String, Object> r) {
        Map<String, String> props = MessageDecoder.string2messageProperties(str(r, "text", null));
        Map<String, Object> ans = obj("properties", new LinkedHashMap<>(props));
        ans.put("order", new ArrayList<>(props.keySet()));  // the returned HashMap's iteration order
        return ans;
    }

    private static Map<String, Object> createOffsetMsgId(Map<String, Object> r) throws Exception {
        InetSocketAddress a = new InetSocketAddress(InetAddress.getByName(str(r, "ip", null)), intv(r, "port"));
        return obj("id", MessageDecoder.createMessageId(a, longOr(r, "offset", 0)));
    }

    private static Map<String, Object> decodeMsgId(Map<String, Object> r) throws Exception {
        MessageId id = MessageDecoder.decodeMessageId(str(r, "id", null));
        InetSocketAddress a = (InetSocketAddress) id.getAddress();
        Map<String, Object> m = obj("ip", a.getAddress().getHostAddress());
        m.put("port", a.getPort());
        m.put("offset", id.getOffset());
        return m;
    }

    private static Map<String, Object> buildSubscription(Map<String, Object> r) throws Exception {
        Class<?> api = cls("FilterAPI");
        String topic = str(r, "topic", null);
        String sub = str(r, "sub_string", null);
        String type = str(r, "expression_type", null);
        Object sd;
        if (type == null) {
            sd = api.getMethod("buildSubscriptionData", String.class, String.class).invoke(null, topic, sub);
        } else {
            sd = api.getMethod("build", String.class, String.class, String.class).invoke(null, topic, sub, type);
        }
        Map<String, Object> m = obj("sub_string", call(sd, "getSubString"));
        m.put("tags_set", new ArrayList<Object>((Collection<?>) call(sd, "getTagsSet")));  // Java iteration order
        m.put("code_set", new ArrayList<Object>((Collection<?>) call(sd, "getCodeSet")));
        m.put("expression_type", call(sd, "getExpressionType"));
        m.put("topic", call(sd, "getTopic"));
        return m;
    }

    /** Load JSON text into a body class with the line's own JSON library, then encode() it. */
    private static Map<String, Object> encodeBody(Map<String, Object> r) throws Exception {
        Class<?> c = cls(str(r, "class", null));
        Object o = RemotingSerializable.fromJson(str(r, "json", null), c);
        List<Object> features = r.get("features") == null ? null : list(r, "features");
        byte[] bytes;
        if (features == null) {
            bytes = o instanceof RemotingSerializable
                ? ((RemotingSerializable) o).encode()
                : RemotingSerializable.encode(o);
        } else {
            Class<?> featureType = featureEnum();
            Object arr = Array.newInstance(featureType, features.size());
            for (int i = 0; i < features.size(); i++) {
                Array.set(arr, i, enumValue(featureType, String.valueOf(features.get(i))));
            }
            Method m = findMethod(o.getClass(), "encode", arr.getClass());
            if (m != null && !Modifier.isStatic(m.getModifiers())) {
                bytes = (byte[]) m.invoke(o, arr);
            } else {
                Method toBytes = jsonClass().getMethod("toJSONBytes", Object.class, arr.getClass());
                bytes = (byte[]) toBytes.invoke(null, o, arr);
            }
        }
        Map<String, Object> m = obj("hex", hex(bytes));
        m.put("text", new String(bytes, StandardCharsets.UTF_8));
        return m;
    }

    /** RemotingSerializable.decode(bytes, cls), answered as plain JSON (see normalize()). */
    private static Map<String, Object> decodeBody(Map<String, Object> r) throws Exception {
        Class<?> c = cls(str(r, "class", null));
        Object o = RemotingSerializable.decode(hexArg(r, "hex"), c);
        return obj("value", normalize(o));
    }

    // ================================================================ message helpers

    private static Map<String, Object> messageView(MessageExt m) {
        Map<String, Object> v = new LinkedHashMap<>();
        v.put("topic", m.getTopic());
        v.put("queue_id", m.getQueueId());
        v.put("flag", m.getFlag());
        v.put("queue_offset", m.getQueueOffset());
        v.put("commit_log_offset", m.getCommitLogOffset());
        v.put("sys_flag", m.getSysFlag());
        v.put("born_timestamp", m.getBornTimestamp());
        v.put("born_host", hostText(m.getBornHost()));
        v.put("store_timestamp", m.getStoreTimestamp());
        v.put("store_host", hostText(m.getStoreHost()));
        v.put("reconsume_times", m.getReconsumeTimes());
        v.put("prepared_transaction_offset", m.getPreparedTransactionOffset());
        v.put("body_crc", m.getBodyCRC());
        v.put("store_size", m.getStoreSize());
        v.put("body_hex", m.getBody() == null ? null : hex(m.getBody()));
        v.put("properties", m.getProperties() == null ? null : new LinkedHashMap<>(m.getProperties()));
        v.put("msg_id", m.getMsgId());
        v.put("offset_msg_id", m instanceof MessageClientExt ? ((MessageClientExt) m).getOffsetMsgId() : null);
        v.put("tags", m.getTags());
        v.put("keys", m.getKeys());
        return v;
    }

    /**
     * properties: [[k, v], ...] put one by one into the message's own map (a HashMap, so Java's hash
     * order decides the encoded order). properties_map "linked" instead installs a LinkedHashMap so
     * the given order is kept.
     */
    private static void applyProperties(Message m, Map<String, Object> r) {
        List<String[]> pairs = pairs(r, "properties");
        if ("linked".equals(str(r, "properties_map", "hash"))) {
            Map<String, String> props = new LinkedHashMap<>();
            for (String[] kv : pairs) {
                props.put(kv[0], kv[1]);
            }
            MessageAccessor.setProperties(m, props);
        } else {
            for (String[] kv : pairs) {
                MessageAccessor.putProperty(m, kv[0], kv[1]);
            }
        }
    }

    private static String hostText(SocketAddress s) {
        if (s == null) {
            return null;
        }
        InetSocketAddress a = (InetSocketAddress) s;
        return a.getAddress().getHostAddress() + ":" + a.getPort();
    }

    private static InetSocketAddress hostArg(Map<String, Object> r, String key) throws Exception {
        Object v = r.get(key);
        if (v == null) {
            return new InetSocketAddress(InetAddress.getByAddress(new byte[4]), 0);
        }
        List<?> l = (List<?>) v;
        return new InetSocketAddress(InetAddress.getByName(String.valueOf(l.get(0))), ((Number) l.get(1)).intValue());
    }

    // ================================================================ header helpers

    @SuppressWarnings("unchecked")
    private static Class<? extends CommandCustomHeader> headerClass(String name) throws Exception {
        Class<?> c = cls(name);
        if (!CommandCustomHeader.class.isAssignableFrom(c)) {
            throw new IllegalArgumentException(c.getName() + " is not a CommandCustomHeader");
        }
        return (Class<? extends CommandCustomHeader>) c;
    }

    private static List<Field> instanceFields(Class<?> c) {
        List<Field> out = new ArrayList<>();
        for (Class<?> k = c; k != null && k != Object.class; k = k.getSuperclass()) {
            for (Field f : k.getDeclaredFields()) {
                int mod = f.getModifiers();
                if (!Modifier.isStatic(mod) && !Modifier.isTransient(mod) && !f.isSynthetic()) {
                    out.add(f);
                }
            }
        }
        return out;
    }

    private static Field findField(Class<?> c, String name) {
        for (Field f : instanceFields(c)) {
            if (f.getName().equals(name)) {
                return f;
            }
        }
        return null;
    }

    private static void setFields(Object header, Map<String, Object> fields) throws Exception {
        if (fields == null) {
            return;
        }
        for (Map.Entry<String, Object> e : fields.entrySet()) {
            Field f = findField(header.getClass(), e.getKey());
            if (f == null) {
                throw new IllegalArgumentException(header.getClass().getSimpleName() + " has no field " + e.getKey());
            }
            f.setAccessible(true);
            f.set(header, convert(f.getType(), e.getValue() == null ? null : scalarText(e.getValue())));
        }
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    private static Object convert(Class<?> t, String s) throws Exception {
        if (s == null) {
            if (t.isPrimitive()) {
                throw new IllegalArgumentException("null for primitive " + t);
            }
            return null;
        }
        if (t == String.class) {
            return s;
        } else if (t == int.class || t == Integer.class) {
            return Integer.parseInt(s);
        } else if (t == long.class || t == Long.class) {
            return Long.parseLong(s);
        } else if (t == boolean.class || t == Boolean.class) {
            return Boolean.parseBoolean(s);
        } else if (t == double.class || t == Double.class) {
            return Double.parseDouble(s);
        } else if (t == short.class || t == Short.class) {
            return Short.parseShort(s);
        } else if (t.isEnum()) {
            return Enum.valueOf((Class<Enum>) t, s);
        }
        throw new IllegalArgumentException("unsupported field type " + t.getName());
    }

    private static Map<String, Object> headerFields(Object h) throws Exception {
        Map<String, Object> m = new TreeMap<>();
        for (Field f : instanceFields(h.getClass())) {
            f.setAccessible(true);
            Object v = f.get(h);
            m.put(f.getName(), v == null ? null : String.valueOf(v));
        }
        return m;
    }

    // ================================================================ body normalization

    /**
     * Turn a decoded Java object into plain JSON. Beans are walked with the property names their JSON
     * library writes (JSON.toJSON), but values are read from the real object so that maps keyed by
     * objects (MessageQueue, Long) survive: such maps become [{"key": k, "value": v}, ...] sorted by
     * the key's canonical JSON text. String-keyed maps stay objects; sets become sorted lists; bean
     * properties whose value is null are left out (as the default encoders do).
     */
    @SuppressWarnings("unchecked")
    static Object normalize(Object v) throws Exception {
        if (v == null || v instanceof String || v instanceof Boolean) {
            return v;
        }
        if (v instanceof Character || v instanceof Enum) {
            return v instanceof Enum ? ((Enum<?>) v).name() : v.toString();
        }
        if (v instanceof Double || v instanceof Float) {
            return ((Number) v).doubleValue();
        }
        if (v instanceof BigDecimal || v instanceof BigInteger) {
            return v;
        }
        if (v instanceof Number) {
            return ((Number) v).longValue();
        }
        if (v instanceof byte[]) {
            return hex((byte[]) v);
        }
        if (v instanceof Map) {
            Map<Object, Object> src = (Map<Object, Object>) v;
            boolean stringKeys = true;
            for (Object k : src.keySet()) {
                if (!(k instanceof String)) {
                    stringKeys = false;
                    break;
                }
            }
            if (stringKeys) {
                Map<String, Object> out = new TreeMap<>();
                for (Map.Entry<Object, Object> e : src.entrySet()) {
                    out.put((String) e.getKey(), normalize(e.getValue()));
                }
                return out;
            }
            List<Map<String, Object>> out = new ArrayList<>();
            for (Map.Entry<Object, Object> e : src.entrySet()) {
                Map<String, Object> kv = new LinkedHashMap<>();
                kv.put("key", normalize(e.getKey()));
                kv.put("value", normalize(e.getValue()));
                out.add(kv);
            }
            out.sort(Comparator.comparing(kv -> Json.canonical(kv.get("key"))));
            return out;
        }
        if (v instanceof Collection || v.getClass().isArray()) {
            List<Object> out = new ArrayList<>();
            if (v instanceof Collection) {
                for (Object o : (Collection<?>) v) {
                    out.add(normalize(o));
                }
            } else {
                for (int i = 0; i < Array.getLength(v); i++) {
                    out.add(normalize(Array.get(v, i)));
                }
            }
            if (v instanceof Set) {
                out.sort(Comparator.comparing(Json::canonical));
            }
            return out;
        }
        // A bean: ask the line's JSON library which properties it has.
        Object j = jsonClass().getMethod("toJSON", Object.class).invoke(null, v);
        if (!(j instanceof Map)) {
            return normalize(j);
        }
        Map<String, Object> out = new TreeMap<>();
        for (Map.Entry<Object, Object> e : ((Map<Object, Object>) j).entrySet()) {
            String name = String.valueOf(e.getKey());
            Object[] raw = readProperty(v, name);
            Object n = normalize(raw != null ? raw[0] : e.getValue());
            if (n != null) {  // fastjson's toJSON keeps null properties, fastjson2's drops them
                out.put(name, n);
            }
        }
        return out;
    }

    /** The raw value of a bean property (getter, then field); null if not found. */
    private static Object[] readProperty(Object bean, String name) {
        String cap = Character.toUpperCase(name.charAt(0)) + name.substring(1);
        for (String g : new String[] {"get" + cap, "is" + cap}) {
            try {
                Method m = bean.getClass().getMethod(g);
                return new Object[] {m.invoke(bean)};
            } catch (Exception ignored) {
                // try the next way
            }
        }
        Field f = findField(bean.getClass(), name);
        if (f != null) {
            try {
                f.setAccessible(true);
                return new Object[] {f.get(bean)};
            } catch (Exception ignored) {
                // fall back to the library's value
            }
        }
        return null;
    }

    // ================================================================ JSON library of this line

    /** com.alibaba.fastjson.JSON or com.alibaba.fastjson2.JSON: whichever RemotingSerializable uses. */
    private static Class<?> jsonClass() throws Exception {
        Class<?> f = featureEnum();
        boolean v2 = f.getName().startsWith("com.alibaba.fastjson2.");
        return Class.forName(v2 ? "com.alibaba.fastjson2.JSON" : "com.alibaba.fastjson.JSON");
    }

    /** The feature enum of RemotingSerializable.encode(Feature...): SerializerFeature or JSONWriter.Feature. */
    private static Class<?> featureEnum() {
        for (Method m : RemotingSerializable.class.getMethods()) {
            if (m.getName().equals("encode") && !Modifier.isStatic(m.getModifiers()) && m.getParameterCount() == 1
                && m.getParameterTypes()[0].isArray()) {
                return m.getParameterTypes()[0].getComponentType();
            }
        }
        throw new IllegalStateException("RemotingSerializable.encode(features...) not found");
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    private static Object enumValue(Class<?> t, String name) {
        return Enum.valueOf((Class<Enum>) t, name);
    }

    // ================================================================ reflection + argument helpers

    static Class<?> cls(String name) throws ClassNotFoundException {
        if (name == null) {
            throw new IllegalArgumentException("class name missing");
        }
        Class<?> c = CLASS_CACHE.get(name);
        if (c != null) {
            return c;
        }
        if (name.indexOf('.') >= 0) {
            c = Class.forName(name);
        } else {
            for (String p : PACKAGES) {
                try {
                    c = Class.forName(p + "." + name);
                    break;
                } catch (ClassNotFoundException ignored) {
                    // next package
                }
            }
        }
        if (c == null) {
            throw new ClassNotFoundException(name + " (searched " + PACKAGES.length + " RocketMQ packages)");
        }
        CLASS_CACHE.put(name, c);
        return c;
    }

    private static Method findMethod(Class<?> c, String name, Class<?>... types) {
        try {
            return c.getMethod(name, types);
        } catch (NoSuchMethodException e) {
            return null;
        }
    }

    private static Object call(Object target, String method) throws Exception {
        return target.getClass().getMethod(method).invoke(target);
    }

    private static Map<String, Object> obj(String k, Object v) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put(k, v);
        return m;
    }

    private static String str(Map<String, Object> r, String k, String dflt) {
        Object v = r.get(k);
        return v == null ? dflt : scalarText(v);
    }

    /** JSON scalar as the text Java would print: 5 not 5.0, true, strings as-is. */
    private static String scalarText(Object v) {
        if (v instanceof Double) {
            double d = (Double) v;
            if (d == Math.rint(d) && !Double.isInfinite(d)) {
                return Long.toString((long) d);
            }
        }
        return String.valueOf(v);
    }

    private static int intv(Map<String, Object> r, String k) {
        Object v = r.get(k);
        if (v == null) {
            throw new IllegalArgumentException("missing " + k);
        }
        return v instanceof Number ? ((Number) v).intValue() : Integer.parseInt(v.toString());
    }

    private static int intOr(Map<String, Object> r, String k, int d) {
        return r.get(k) == null ? d : intv(r, k);
    }

    private static long longOr(Map<String, Object> r, String k, long d) {
        Object v = r.get(k);
        if (v == null) {
            return d;
        }
        return v instanceof Number ? ((Number) v).longValue() : Long.parseLong(v.toString());
    }

    private static boolean boolOr(Map<String, Object> r, String k, boolean d) {
        Object v = r.get(k);
        return v == null ? d : (v instanceof Boolean ? (Boolean) v : Boolean.parseBoolean(v.toString()));
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> map(Map<String, Object> r, String k) {
        return (Map<String, Object>) r.get(k);
    }

    @SuppressWarnings("unchecked")
    private static List<Object> list(Map<String, Object> r, String k) {
        Object v = r.get(k);
        if (v == null) {
            throw new IllegalArgumentException("missing " + k);
        }
        return (List<Object>) v;
    }

    /** [[k, v], ...] (or a JSON object, in its given order). */
    private static List<String[]> pairs(Map<String, Object> r, String k) {
        List<String[]> out = new ArrayList<>();
        Object v = r.get(k);
        if (v instanceof Map) {
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                Object val = e.getValue();
                out.add(new String[] {String.valueOf(e.getKey()), val == null ? null : scalarText(val)});
            }
        } else if (v != null) {
            for (Object o : (List<?>) v) {
                List<?> kv = (List<?>) o;
                out.add(new String[] {String.valueOf(kv.get(0)), kv.get(1) == null ? null : scalarText(kv.get(1))});
            }
        }
        return out;
    }

    private static byte[] hexArg(Map<String, Object> r, String k) {
        Object v = r.get(k);
        if (v == null) {
            return null;
        }
        String s = v.toString();
        if (s.length() % 2 != 0) {
            throw new IllegalArgumentException(k + ": odd-length hex");
        }
        byte[] b = new byte[s.length() / 2];
        for (int i = 0; i < b.length; i++) {
            b[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        }
        return b;
    }

    private static final char[] HEX = "0123456789abcdef".toCharArray();

    static String hex(byte[] b) {
        char[] c = new char[b.length * 2];
        for (int i = 0; i < b.length; i++) {
            c[2 * i] = HEX[(b[i] >> 4) & 0xF];
            c[2 * i + 1] = HEX[b[i] & 0xF];
        }
        return new String(c);
    }
}
