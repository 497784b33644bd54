package rmqproxy.grpcclient;

import java.io.FileOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.LocalTime;
import java.time.format.DateTimeFormatter;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.shaded.org.slf4j.Logger;
import org.apache.rocketmq.shaded.org.slf4j.helpers.FormattingTuple;
import org.apache.rocketmq.shaded.org.slf4j.helpers.MarkerIgnoringBase;
import org.apache.rocketmq.shaded.org.slf4j.helpers.MessageFormatter;

/**
 * The RocketMQ gRPC client's log (its shaded SLF4J, bound by StaticLoggerBinder): lines
 * "HH:mm:ss.SSS LEVEL [thread] Logger - message" appended to {@code ${rocketmq.log.root}/rocketmq_client.log}
 * (java.io.tmpdir without the property), at {@code -Drocketmq.log.level} (trace, debug, info (default),
 * warn, error) and above.  Never the console: stdout is the RESULT line's.
 */
public final class FileLog extends MarkerIgnoringBase {
    private static final long serialVersionUID = 1L;
    private static final DateTimeFormatter TIME = DateTimeFormatter.ofPattern("HH:mm:ss.SSS");
    private static final String[] LEVELS = {"TRACE", "DEBUG", "INFO", "WARN", "ERROR"};
    private static final int THRESHOLD = threshold(System.getProperty("rocketmq.log.level", "info"));
    private static final Map<String, Logger> LOGGERS = new ConcurrentHashMap<>();
    private static PrintStream sink;

    private final String shortName;

    private FileLog(String name) {
        this.name = name;
        this.shortName = name.substring(name.lastIndexOf('.') + 1);
    }

    /** The logger of {@code name} (one per name). */
    public static Logger logger(String name) {
        return LOGGERS.computeIfAbsent(name, FileLog::new);
    }

    private static int threshold(String level) {
        for (int i = 0; i < LEVELS.length; i++) {
            if (LEVELS[i].equalsIgnoreCase(level.trim())) {
                return i;
            }
        }
        return 2;
    }

    private static synchronized PrintStream sink() {
        if (sink == null) {
            Path dir = Paths.get(System.getProperty("rocketmq.log.root", System.getProperty("java.io.tmpdir")));
            try {
                Files.createDirectories(dir);
                sink = new PrintStream(new FileOutputStream(dir.resolve("rocketmq_client.log").toFile(), true), true,
                    StandardCharsets.UTF_8);
            } catch (IOException e) {
                sink = new PrintStream(PrintStream.nullOutputStream());
            }
        }
        return sink;
    }

    private void log(int level, String format, Object[] args, Throwable thrown) {
        if (level < THRESHOLD) {
            return;
        }
        FormattingTuple t = MessageFormatter.arrayFormat(format, args, thrown);
        Throwable cause = thrown != null ? thrown : t.getThrowable();
        String line = String.format(Locale.ROOT, "%s %-5s [%s] %s - %s", LocalTime.now().format(TIME), LEVELS[level],
            Thread.currentThread().getName(), shortName, t.getMessage());
        PrintStream out = sink();
        synchronized (out) {
            out.println(line);
            if (cause != null) {
                cause.printStackTrace(out);
            }
        }
    }

    @Override
    public boolean isTraceEnabled() {
        return THRESHOLD <= 0;
    }

    @Override
    public void trace(String msg) {
        log(0, msg, null, null);
    }

    @Override
    public void trace(String format, Object arg) {
        log(0, format, new Object[] {arg}, null);
    }

    @Override
    public void trace(String format, Object arg1, Object arg2) {
        log(0, format, new Object[] {arg1, arg2}, null);
    }

    @Override
    public void trace(String format, Object... args) {
        log(0, format, args, null);
    }

    @Override
    public void trace(String msg, Throwable t) {
        log(0, msg, null, t);
    }

    @Override
    public boolean isDebugEnabled() {
        return THRESHOLD <= 1;
    }

    @Override
    public void debug(String msg) {
        log(1, msg, null, null);
    }

    @Override
    public void debug(String format, Object arg) {
        log(1, format, new Object[] {arg}, null);
    }

    @Override
    public void debug(String format, Object arg1, Object arg2) {
        log(1, format, new Object[] {arg1, arg2}, null);
    }

    @Override
    public void debug(String format, Object... args) {
        log(1, format, args, null);
    }

    @Override
    public void debug(String msg, Throwable t) {
        log(1, msg, null, t);
    }

    @Override
    public boolean isInfoEnabled() {
        return THRESHOLD <= 2;
    }

    @Override
    public void info(String msg) {
        log(2, msg, null, null);
    }

    @Override
    public void info(String format, Object arg) {
        log(2, format, new Object[] {arg}, null);
    }

    @Override
    public void info(String format, Object arg1, Object arg2) {
        log(2, format, new Object[] {arg1, arg2}, null);
    }

    @Override
    public void info(String format, Object... args) {
        log(2, format, args, null);
    }

    @Override
    public void info(String msg, Throwable t) {
        log(2, msg, null, t);
    }

    @Override
    public boolean isWarnEnabled() {
        return THRESHOLD <= 3;
    }

    @Override
    public void warn(String msg) {
        log(3, msg, null, null);
    }

    @Override
    public void warn(String format, Object arg) {
        log(3, format, new Object[] {arg}, null);
    }

    @Override
    public void warn(String format, Object arg1, Object arg2) {
        log(3, format, new Object[] {arg1, arg2}, null);
    }

    @Override
    public void warn(String format, Object... args) {
        log(3, format, args, null);
    }

    @Override
    public void warn(String msg, Throwable t) {
        log(3, msg, null, t);
    }

    @Override
    public boolean isErrorEnabled() {
        return THRESHOLD <= 4;
    }

    @Override
    public void error(String msg) {
        log(4, msg, null, null);
    }

    @Override
    public void error(String format, Object arg) {
        log(4, format, new Object[] {arg}, null);
    }

    @Override
    public void error(String format, Object arg1, Object arg2) {
        log(4, format, new Object[] {arg1, arg2}, null);
    }

    @Override
    public void error(String format, Object... args) {
        log(4, format, args, null);
    }

    @Override
    public void error(String msg, Throwable t) {
        log(4, msg, null, t);
    }
}
