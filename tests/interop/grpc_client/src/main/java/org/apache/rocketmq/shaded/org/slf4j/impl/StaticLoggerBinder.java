package org.apache.rocketmq.shaded.org.slf4j.impl;

import org.apache.rocketmq.shaded.org.slf4j.ILoggerFactory;
import org.apache.rocketmq.shaded.org.slf4j.spi.LoggerFactoryBinder;
import rmqproxy.grpcclient.FileLog;

/**
 * The SLF4J 1.7 binding that rocketmq-client-java 5.0.8 looks for and lacks.
 *
 * <p>The client's jar shades slf4j-api 1.7.30 (binds through this class, relocated under
 * org.apache.rocketmq.shaded) together with logback 1.3.15 (an SLF4J 2 provider that ships no such
 * class), so on its own the client logs nothing ("SLF4J: Defaulting to no-operation (NOP) logger" on
 * stderr; apache/rocketmq-clients issue 1022), whatever its rocketmq.logback.xml, -Drocketmq.log.root or
 * -Dmq.consoleAppender.enabled say.  This binding hands the client {@link FileLog} instead: one file,
 * {@code ${rocketmq.log.root}/rocketmq_client.log}.  A client version whose jar has a working binding
 * of its own finds this one first on the classpath (the program's classes lead it).
 */
public final class StaticLoggerBinder implements LoggerFactoryBinder {
    /** Read by the shaded LoggerFactory's version check. */
    public static String REQUESTED_API_VERSION = "1.7.30";
    private static final StaticLoggerBinder SINGLETON = new StaticLoggerBinder();

    private final ILoggerFactory factory = FileLog::logger;

    private StaticLoggerBinder() {
    }

    public static StaticLoggerBinder getSingleton() {
        return SINGLETON;
    }

    @Override
    public ILoggerFactory getLoggerFactory() {
        return factory;
    }

    @Override
    public String getLoggerFactoryClassStr() {
        return FileLog.class.getName();
    }
}
