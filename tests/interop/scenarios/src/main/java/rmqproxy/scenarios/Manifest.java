package rmqproxy.scenarios;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * What the send scenario sent: one tab-separated line per message,
 * {@code key tag mode status msgId offsetMsgId queueId queueOffset}.  The consume scenarios read it
 * to know which keys (and tags) they must receive.
 */
final class Manifest {
    static final class Entry {
        final String key;
        final String tag;
        final String mode;
        final String status;

        Entry(String key, String tag, String mode, String status) {
            this.key = key;
            this.tag = tag;
            this.mode = mode;
            this.status = status;
        }
    }

    final String topic;
    final List<Entry> entries;

    private Manifest(String topic, List<Entry> entries) {
        this.topic = topic;
        this.entries = entries;
    }

    /** The header line is "#topic\t<topic>". */
    static Manifest read(String path) throws IOException {
        List<String> lines = Files.readAllLines(Paths.get(path), StandardCharsets.UTF_8);
        String topic = null;
        List<Entry> entries = new ArrayList<>();
        for (String line : lines) {
            if (line.isEmpty()) {
                continue;
            }
            String[] f = line.split("\t", -1);
            if (f[0].equals("#topic")) {
                topic = f[1];
                continue;
            }
            entries.add(new Entry(f[0], f[1], f[2], f[3]));
        }
        if (topic == null) {
            throw new IOException(path + " has no #topic line");
        }
        return new Manifest(topic, entries);
    }

    static void write(Path path, String topic, List<String[]> rows) throws IOException {
        StringBuilder sb = new StringBuilder("#topic\t").append(topic).append('\n');
        for (String[] row : rows) {
            sb.append(String.join("\t", row)).append('\n');
        }
        Files.write(path, sb.toString().getBytes(StandardCharsets.UTF_8));
    }

    /** key -> tag for the entries whose tag is in {@code tags} (all entries when tags is null). */
    Map<String, String> expected(Set<String> tags) {
        Map<String, String> m = new LinkedHashMap<>();
        for (Entry e : entries) {
            if (tags == null || tags.contains(e.tag)) {
                m.put(e.key, e.tag);
            }
        }
        return m;
    }

    /** key -> mode, for reporting missing keys per send mode. */
    Map<String, String> modes() {
        Map<String, String> m = new LinkedHashMap<>();
        for (Entry e : entries) {
            m.put(e.key, e.mode);
        }
        return m;
    }
}
