// One orderly push consumer in its own JVM for the issue 8 scenarios (tests/interop/orderly.py runs
// it; see tests/interop/test_orderly.py and bench/locks.py). It uses the client's defaults apart
// from CONSUME_FROM_FIRST_OFFSET (and ALLOCATE, when given) and writes one line per consumed
// message to LOG_PATH:
//
//   M <session> <queue_id> <order_id> <seq> <born_ms> <start_us> <end_us> <broker_name>
//
// (queue ids repeat per broker: a queue is <broker_name, queue_id>; the broker name comes last so
// that readers of the first eight fields need no change).
// start_us/end_us are epoch microseconds taken on entry to and exit from the listener's work
// (the optional CONSUME_US busy wait). Each listener call writes its lines with a single unbuffered
// write() before returning, so a line is in the kernel before the client can commit its offset:
// a kill -9 loses no line for a message the group will not see again. Other lines:
//
//   S <session> <pid> <client_id> <epoch_us>      after start()
//   B <session> <epoch_us>                        clean shutdown begins
//   E <session> <epoch_us>                        clean shutdown done
//
// A clean stop is requested with the line "stop" (or EOF) on stdin; the program then shuts the
// consumer down (UNLOCK_BATCH_MQ, offsets, UNREGISTER_CLIENT) and exits 0.
//
// Args: NAMESRV TOPIC GROUP SESSION LOG_PATH [CONSUME_US] [ALLOCATE]
//   ALLOCATE: "circle" (AllocateMessageQueueAveragelyByCircle: with queues on several brokers each
//   consumer gets queues of every broker), else the client's default (AllocateMessageQueueAveragely).
import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.List;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragelyByCircle;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

public class OrderlyConsumer {
    static FileOutputStream log;

    static long nowMicros() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
    }

    static synchronized void write(String text) {
        try {
            log.write(text.getBytes(StandardCharsets.UTF_8)); // FileOutputStream: one write(2), not interruptible
        } catch (Exception e) {
            e.printStackTrace();
            Runtime.getRuntime().halt(3); // a lost line would look like a lost message
        }
    }

    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        String group = args[2];
        String session = args[3];
        log = new FileOutputStream(args[4], true);
        long consumeMicros = args.length > 5 ? Long.parseLong(args[5]) : 0;
        String allocate = args.length > 6 ? args[6] : "";

        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        if (allocate.equals("circle")) {
            consumer.setAllocateMessageQueueStrategy(new AllocateMessageQueueAveragelyByCircle());
        }
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerOrderly) (msgs, context) -> {
            int queueId = context.getMessageQueue().getQueueId();
            String broker = context.getMessageQueue().getBrokerName();
            long start = nowMicros();
            if (consumeMicros > 0) {
                long until = System.nanoTime() + consumeMicros * 1_000L;
                while (System.nanoTime() < until) {
                    Thread.onSpinWait();
                }
            }
            long end = nowMicros();
            StringBuilder lines = new StringBuilder();
            for (MessageExt m : msgs) {
                lines.append("M ").append(session).append(' ').append(queueId).append(' ')
                    .append(m.getUserProperty("order")).append(' ').append(m.getUserProperty("seq")).append(' ')
                    .append(m.getBornTimestamp()).append(' ').append(start).append(' ').append(end).append(' ')
                    .append(broker).append('\n');
            }
            write(lines.toString());
            return ConsumeOrderlyStatus.SUCCESS;
        });
        consumer.start();
        String clientId = consumer.getDefaultMQPushConsumerImpl().getmQClientFactory().getClientId();
        write("S " + session + " " + ProcessHandle.current().pid() + " " + clientId + " " + nowMicros() + "\n");
        System.out.println("STARTED " + clientId);
        System.out.flush();

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null && !line.trim().equals("stop"); line = in.readLine()) {
            // anything else is ignored
        }
        write("B " + session + " " + nowMicros() + "\n");
        consumer.shutdown();
        write("E " + session + " " + nowMicros() + "\n");
        System.out.println("STOPPED");
        System.out.flush();
        log.close();
        System.exit(0);
    }
}
