/*
 * rmqproxy interop oracle -- minimal JSON reader/writer for the oracle's own stdin/stdout protocol.
 *
 * Deliberately independent of fastjson/fastjson2 (whose behaviour is what the oracle observes, so it
 * must not also shape the oracle's own answers). Values: null, Boolean, String, Long/BigInteger
 * (integers), Double/BigDecimal (other numbers), List, Map. Output is compact, ASCII-only (non-ASCII
 * escaped as \\uXXXX) and, when sortKeys is set, canonical (object keys sorted), which is what
 * Oracle uses to order sets and object-keyed maps.
 */
package rmqproxy.oracle;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

final class Json {
    private Json() {
    }

    // ---------------------------------------------------------------- reading

    static Object parse(String text) {
        Reader r = new Reader(text);
        r.skipWs();
        Object v = r.value();
        r.skipWs();
        if (r.pos != text.length()) {
            throw new IllegalArgumentException("trailing characters at " + r.pos);
        }
        return v;
    }

    private static final class Reader {
        final String s;
        int pos;

        Reader(String s) {
            this.s = s;
        }

        void skipWs() {
            while (pos < s.length()) {
                char c = s.charAt(pos);
                if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
                    pos++;
                } else {
                    break;
                }
            }
        }

        IllegalArgumentException err(String what) {
            return new IllegalArgumentException("bad JSON: " + what + " at " + pos);
        }

        Object value() {
            if (pos >= s.length()) {
                throw err("unexpected end");
            }
            char c = s.charAt(pos);
            switch (c) {
                case '{':
                    return object();
                case '[':
                    return array();
                case '"':
                    return string();
                case 't':
                    literal("true");
                    return Boolean.TRUE;
                case 'f':
                    literal("false");
                    return Boolean.FALSE;
                case 'n':
                    literal("null");
                    return null;
                default:
                    return number();
            }
        }

        void literal(String word) {
            if (!s.startsWith(word, pos)) {
                throw err("expected " + word);
            }
            pos += word.length();
        }

        Map<String, Object> object() {
            Map<String, Object> m = new LinkedHashMap<>();
            pos++;
            skipWs();
            if (pos < s.length() && s.charAt(pos) == '}') {
                pos++;
                return m;
            }
            while (true) {
                skipWs();
                if (pos >= s.length() || s.charAt(pos) != '"') {
                    throw err("expected key");
                }
                String k = string();
                skipWs();
                if (pos >= s.length() || s.charAt(pos) != ':') {
                    throw err("expected ':'");
                }
                pos++;
                skipWs();
                m.put(k, value());
                skipWs();
                if (pos >= s.length()) {
                    throw err("unterminated object");
                }
                char c = s.charAt(pos++);
                if (c == '}') {
                    return m;
                }
                if (c != ',') {
                    throw err("expected ',' or '}'");
                }
            }
        }

        List<Object> array() {
            List<Object> l = new ArrayList<>();
            pos++;
            skipWs();
            if (pos < s.length() && s.charAt(pos) == ']') {
                pos++;
                return l;
            }
            while (true) {
                skipWs();
                l.add(value());
                skipWs();
                if (pos >= s.length()) {
                    throw err("unterminated array");
                }
                char c = s.charAt(pos++);
                if (c == ']') {
                    return l;
                }
                if (c != ',') {
                    throw err("expected ',' or ']'");
                }
            }
        }

        String string() {
            StringBuilder b = new StringBuilder();
            pos++;
            while (true) {
                if (pos >= s.length()) {
                    throw err("unterminated string");
                }
                char c = s.charAt(pos++);
                if (c == '"') {
                    return b.toString();
                }
                if (c != '\\') {
                    b.append(c);
                    continue;
                }
                char e = s.charAt(pos++);
                switch (e) {
                    case '"':
                    case '\\':
                    case '/':
                        b.append(e);
                        break;
                    case 'b':
                        b.append('\b');
                        break;
                    case 'f':
                        b.append('\f');
                        break;
                    case 'n':
                        b.append('\n');
                        break;
                    case 'r':
                        b.append('\r');
                        break;
                    case 't':
                        b.append('\t');
                        break;
                    case 'u':
                        b.append((char) Integer.parseInt(s.substring(pos, pos + 4), 16));
                        pos += 4;
                        break;
                    default:
                        throw err("bad escape");
                }
            }
        }

        Object number() {
            int start = pos;
            while (pos < s.length() && "+-0123456789.eE".indexOf(s.charAt(pos)) >= 0) {
                pos++;
            }
            String t = s.substring(start, pos);
            if (t.isEmpty()) {
                throw err("unexpected character");
            }
            if (t.indexOf('.') < 0 && t.indexOf('e') < 0 && t.indexOf('E') < 0) {
                BigInteger bi = new BigInteger(t);
                return bi.bitLength() < 64 ? (Object) bi.longValue() : bi;
            }
            return Double.parseDouble(t);
        }
    }

    // ---------------------------------------------------------------- writing

    static String write(Object v) {
        StringBuilder b = new StringBuilder();
        write(b, v, false);
        return b.toString();
    }

    /** Canonical text: object keys sorted. Used to order sets and object-keyed maps. */
    static String canonical(Object v) {
        StringBuilder b = new StringBuilder();
        write(b, v, true);
        return b.toString();
    }

    @SuppressWarnings("unchecked")
    private static void write(StringBuilder b, Object v, boolean sortKeys) {
        if (v == null) {
            b.append("null");
        } else if (v instanceof String) {
            str(b, (String) v);
        } else if (v instanceof Boolean) {
            b.append(v.toString());
        } else if (v instanceof Double || v instanceof Float) {
            double d = ((Number) v).doubleValue();
            if (Double.isNaN(d) || Double.isInfinite(d)) {
                str(b, Double.toString(d));
            } else if (d == Math.rint(d) && Math.abs(d) < 1e15) {
                b.append(new BigDecimal(d).toPlainString()).append(".0");
            } else {
                b.append(Double.toString(d));
            }
        } else if (v instanceof BigDecimal) {
            b.append(((BigDecimal) v).toString());
        } else if (v instanceof Number) {
            b.append(v.toString());
        } else if (v instanceof Map) {
            Map<String, Object> m = (Map<String, Object>) v;
            if (sortKeys) {
                m = new TreeMap<>(m);
            }
            b.append('{');
            boolean first = true;
            for (Map.Entry<String, Object> e : m.entrySet()) {
                if (!first) {
                    b.append(',');
                }
                first = false;
                str(b, String.valueOf(e.getKey()));
                b.append(':');
                write(b, e.getValue(), sortKeys);
            }
            b.append('}');
        } else if (v instanceof Collection) {
            b.append('[');
            boolean first = true;
            for (Object o : (Collection<Object>) v) {
                if (!first) {
                    b.append(',');
                }
                first = false;
                write(b, o, sortKeys);
            }
            b.append(']');
        } else {
            str(b, v.toString());
        }
    }

    private static void str(StringBuilder b, String s) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"':
                    b.append("\\\"");
                    break;
                case '\\':
                    b.append("\\\\");
                    break;
                case '\n':
                    b.append("\\n");
                    break;
                case '\r':
                    b.append("\\r");
                    break;
                case '\t':
                    b.append("\\t");
                    break;
                default:
                    if (c < 0x20 || c > 0x7e) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
            }
        }
        b.append('"');
    }
}
