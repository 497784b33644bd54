package rmqproxy.scenarios;

import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A minimal JSON writer for the RESULT line: maps, collections, arrays of objects, strings, numbers,
 * booleans, null; and a reader for the adminshell's request lines (objects, arrays, strings,
 * numbers as their text, true/false/null). The gRPC client program (../grpc_client) compiles this
 * file too, for its own RESULT line.
 */
public final class Json {
    private Json() {
    }

    public static String write(Object value) {
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

    /** Parse one JSON value: Map, List, String (numbers too, as written), Boolean or null. */
    static Object read(String text) {
        int[] pos = {0};
        Object v = value(text, pos);
        skip(text, pos);
        if (pos[0] != text.length()) {
            throw new IllegalArgumentException("trailing characters at " + pos[0]);
        }
        return v;
    }

    private static void skip(String t, int[] pos) {
        while (pos[0] < t.length() && Character.isWhitespace(t.charAt(pos[0]))) {
            pos[0]++;
        }
    }

    private static Object value(String t, int[] pos) {
        skip(t, pos);
        if (pos[0] >= t.length()) {
            throw new IllegalArgumentException("unexpected end of JSON");
        }
        char c = t.charAt(pos[0]);
        if (c == '{') {
            pos[0]++;
            Map<String, Object> m = new LinkedHashMap<>();
            skip(t, pos);
            if (t.charAt(pos[0]) == '}') {
                pos[0]++;
                return m;
            }
            while (true) {
                skip(t, pos);
                String k = (String) value(t, pos);
                skip(t, pos);
                expect(t, pos, ':');
                m.put(k, value(t, pos));
                skip(t, pos);
                if (t.charAt(pos[0]) == ',') {
                    pos[0]++;
                    continue;
                }
                expect(t, pos, '}');
                return m;
            }
        }
        if (c == '[') {
            pos[0]++;
            List<Object> l = new ArrayList<>();
            skip(t, pos);
            if (t.charAt(pos[0]) == ']') {
                pos[0]++;
                return l;
            }
            while (true) {
                l.add(value(t, pos));
                skip(t, pos);
                if (t.charAt(pos[0]) == ',') {
                    pos[0]++;
                    continue;
                }
                expect(t, pos, ']');
                return l;
            }
        }
        if (c == '"') {
            StringBuilder sb = new StringBuilder();
            pos[0]++;
            while (t.charAt(pos[0]) != '"') {
                char ch = t.charAt(pos[0]++);
                if (ch == '\\') {
                    char e = t.charAt(pos[0]++);
                    switch (e) {
                        case 'n':
                            sb.append('\n');
                            break;
                        case 't':
                            sb.append('\t');
                            break;
                        case 'r':
                            sb.append('\r');
                            break;
                        case 'b':
                            sb.append('\b');
                            break;
                        case 'f':
                            sb.append('\f');
                            break;
                        case 'u':
                            sb.append((char) Integer.parseInt(t.substring(pos[0], pos[0] + 4), 16));
                            pos[0] += 4;
                            break;
                        default:
                            sb.append(e);
                    }
                } else {
                    sb.append(ch);
                }
            }
            pos[0]++;
            return sb.toString();
        }
        int start = pos[0];
        while (pos[0] < t.length() && ",]} \t\r\n".indexOf(t.charAt(pos[0])) < 0) {
            pos[0]++;
        }
        String word = t.substring(start, pos[0]);
        switch (word) {
            case "true":
                return Boolean.TRUE;
            case "false":
                return Boolean.FALSE;
            case "null":
                return null;
            default:
                if (word.isEmpty()) {
                    throw new IllegalArgumentException("unexpected '" + c + "' at " + start);
                }
                return word;
        }
    }

    private static void expect(String t, int[] pos, char c) {
        if (pos[0] >= t.length() || t.charAt(pos[0]) != c) {
            throw new IllegalArgumentException("expected '" + c + "' at " + pos[0]);
        }
        pos[0]++;
    }
}
