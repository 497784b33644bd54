package rmqproxy.grpcclient;

import java.util.Collection;
import java.util.Map;

/**
 * A minimal JSON writer for the RESULT line: maps, collections, arrays of objects, strings, numbers,
 * booleans, null (anything else as its string).  Non-ASCII characters are written as JSON unicode escapes, so the
 * line is plain ASCII whatever the platform encoding.  The same writer as the remoting scenarios'
 * (scenarios/.../Json.java), without the reader this program does not need.
 */
final class Json {
    private Json() {
    }

    static String write(Object value) {
        StringBuilder sb = new StringBuilder();
        write(sb, value);
        return sb.toString();
    }

    private static void write(StringBuilder sb, Object v) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof String) {
            string(sb, (String) v);
        } else if (v instanceof Boolean) {
            sb.append(v.toString());
        } else if (v instanceof Double || v instanceof Float) {
            double d = ((Number) v).doubleValue();
            sb.append(Double.isFinite(d) ? Double.toString(d) : "null");
        } else if (v instanceof Number) {
            sb.append(v.toString());
        } else if (v instanceof Map) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                string(sb, String.valueOf(e.getKey()));
                sb.append(':');
                write(sb, e.getValue());
            }
            sb.append('}');
        } else if (v instanceof Collection) {
            array(sb, ((Collection<?>) v).toArray());
        } else if (v instanceof Object[]) {
            array(sb, (Object[]) v);
        } else if (v instanceof int[]) {
            int[] a = (int[]) v;
            Object[] boxed = new Object[a.length];
            for (int i = 0; i < a.length; i++) {
                boxed[i] = a[i];
            }
            array(sb, boxed);
        } else {
            string(sb, v.toString());
        }
    }

    private static void array(StringBuilder sb, Object[] items) {
        sb.append('[');
        for (int i = 0; i < items.length; i++) {
            if (i > 0) {
                sb.append(',');
            }
            write(sb, items[i]);
        }
        sb.append(']');
    }

    private static void string(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"':
                    sb.append("\\\"");
                    break;
                case '\\':
                    sb.append("\\\\");
                    break;
                case '\n':
                    sb.append("\\n");
                    break;
                case '\r':
                    sb.append("\\r");
                    break;
                case '\t':
                    sb.append("\\t");
                    break;
                default:
                    if (c < 0x20 || c > 0x7e) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        sb.append('"');
    }
}
