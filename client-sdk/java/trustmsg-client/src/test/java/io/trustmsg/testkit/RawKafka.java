package io.trustmsg.testkit;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.Record;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.record.TimestampType;

/**
 * A minimal Kafka reader for the tests (Metadata v1, Fetch v4 on plain sockets; the record batches
 * decoded by kafka-clients' own {@link MemoryRecords}), because kafka-clients' consumer cannot talk
 * to the kit's broker: librdkafka's mock cluster answers the ApiVersions v3+ request that every
 * kafka-clients since 2.4 sends first with a malformed UNSUPPORTED_VERSION body, which
 * kafka-clients reads as throttle_time_ms=1179648 and so mutes the broker for about 20 minutes (see
 * {@link KafkaProbe}). This reader starts with no ApiVersions request at all.
 */
public final class RawKafka implements AutoCloseable {
  private final Socket socket;
  private final DataInputStream in;
  private final DataOutputStream out;
  private int correlation;

  public RawKafka(String host, int port) throws IOException {
    socket = new Socket(host, port);
    socket.setSoTimeout(15_000);
    in = new DataInputStream(socket.getInputStream());
    out = new DataOutputStream(socket.getOutputStream());
  }

  public static RawKafka bootstrap(String bootstrap) throws IOException {
    String first = bootstrap.split(",")[0];
    int colon = first.lastIndexOf(':');
    return new RawKafka(first.substring(0, colon), Integer.parseInt(first.substring(colon + 1)));
  }

  private ByteBuffer call(int apiKey, int version, byte[] body) throws IOException {
    byte[] client = "trustmsg-java-tests".getBytes(StandardCharsets.UTF_8);
    int id = ++correlation;
    ByteBuffer req = ByteBuffer.allocate(4 + 2 + 2 + 4 + 2 + client.length + body.length);
    req.putInt(req.capacity() - 4).putShort((short) apiKey).putShort((short) version).putInt(id);
    req.putShort((short) client.length).put(client).put(body);
    out.write(req.array());
    out.flush();
    int size = in.readInt();
    byte[] answer = new byte[size];
    in.readFully(answer);
    ByteBuffer b = ByteBuffer.wrap(answer);
    if (b.getInt() != id) {
      throw new IOException("Kafka answered another request");
    }
    return b;
  }

  /** A partition's leader. */
  public record Leader(int partition, String host, int port) {}

  /** The topic's partitions and leaders; empty while the topic does not exist. */
  public List<Leader> metadata(String topic) throws IOException {
    byte[] name = topic.getBytes(StandardCharsets.UTF_8);
    ByteBuffer body =
        ByteBuffer.allocate(4 + 2 + name.length).putInt(1).putShort((short) name.length).put(name);
    ByteBuffer r = call(3, 1, body.array());
    Map<Integer, String[]> brokers = new LinkedHashMap<>();
    for (int i = r.getInt(); i > 0; i--) {
      int id = r.getInt();
      String host = string(r);
      int port = r.getInt();
      string(r); // rack
      brokers.put(id, new String[] {host, Integer.toString(port)});
    }
    r.getInt(); // controller
    List<Leader> leaders = new ArrayList<>();
    for (int t = r.getInt(); t > 0; t--) {
      short error = r.getShort();
      string(r);
      r.get(); // internal
      for (int p = r.getInt(); p > 0; p--) {
        short perr = r.getShort();
        int partition = r.getInt();
        int leader = r.getInt();
        for (int n = r.getInt(); n > 0; n--) {
          r.getInt();
        }
        for (int n = r.getInt(); n > 0; n--) {
          r.getInt();
        }
        String[] b = brokers.get(leader);
        if (error == 0 && perr == 0 && b != null) {
          leaders.add(new Leader(partition, b[0], Integer.parseInt(b[1])));
        }
      }
    }
    return leaders;
  }

  /**
   * The records of one partition from {@code offset}, as kafka-clients' consumer would give them.
   */
  public List<ConsumerRecord<byte[], byte[]>> fetch(String topic, int partition, long offset)
      throws IOException {
    byte[] name = topic.getBytes(StandardCharsets.UTF_8);
    ByteBuffer body = ByteBuffer.allocate(4 + 4 + 4 + 4 + 1 + 4 + 2 + name.length + 4 + 4 + 8 + 4);
    body.putInt(-1).putInt(500).putInt(1).putInt(8 << 20).put((byte) 0);
    body.putInt(1).putShort((short) name.length).put(name);
    body.putInt(1).putInt(partition).putLong(offset).putInt(8 << 20);
    ByteBuffer r = call(1, 4, body.array());
    r.getInt(); // throttle
    List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>();
    for (int t = r.getInt(); t > 0; t--) {
      string(r);
      for (int p = r.getInt(); p > 0; p--) {
        int part = r.getInt();
        short error = r.getShort();
        r.getLong(); // high watermark
        r.getLong(); // last stable offset
        int aborted = r.getInt();
        for (int a = 0; a < aborted; a++) {
          r.getLong();
          r.getLong();
        }
        int size = r.getInt();
        if (error != 0) {
          throw new IOException("Fetch of " + topic + "/" + part + " answered error " + error);
        }
        if (size <= 0) {
          continue;
        }
        ByteBuffer slice = r.slice();
        slice.limit(size);
        r.position(r.position() + size);
        for (RecordBatch batch : MemoryRecords.readableRecords(slice).batches()) {
          for (Record rec : batch) {
            if (rec.offset() < offset) {
              continue;
            }
            records.add(
                new ConsumerRecord<>(
                    topic,
                    part,
                    rec.offset(),
                    rec.timestamp(),
                    TimestampType.CREATE_TIME,
                    rec.keySize(),
                    rec.valueSize(),
                    bytes(rec.key()),
                    bytes(rec.value()),
                    new RecordHeaders(rec.headers()),
                    Optional.empty()));
          }
        }
      }
    }
    return records;
  }

  /**
   * Writes one record with Produce v3 (acks=-1) and returns its offset: a record batch of magic 2
   * built by kafka-clients' own {@link MemoryRecords}.
   */
  public long produce(
      String topic,
      int partition,
      byte[] key,
      byte[] value,
      org.apache.kafka.common.header.Header[] headers)
      throws IOException {
    MemoryRecords records =
        MemoryRecords.withRecords(
            org.apache.kafka.common.compress.Compression.NONE,
            new org.apache.kafka.common.record.SimpleRecord(
                System.currentTimeMillis(), key, value, headers));
    ByteBuffer batch = records.buffer();
    byte[] name = topic.getBytes(StandardCharsets.UTF_8);
    ByteBuffer body =
        ByteBuffer.allocate(2 + 2 + 4 + 4 + 2 + name.length + 4 + 4 + 4 + batch.remaining());
    body.putShort((short) -1).putShort((short) -1).putInt(30_000);
    body.putInt(1).putShort((short) name.length).put(name);
    body.putInt(1).putInt(partition).putInt(batch.remaining()).put(batch);
    ByteBuffer r = call(0, 3, body.array());
    r.getInt(); // topics
    string(r);
    r.getInt(); // partitions
    r.getInt();
    short error = r.getShort();
    long offset = r.getLong();
    if (error != 0) {
      throw new IOException("Produce to " + topic + "/" + partition + " answered error " + error);
    }
    return offset;
  }

  private static byte[] bytes(ByteBuffer b) {
    if (b == null) {
      return null;
    }
    byte[] out = new byte[b.remaining()];
    b.get(out);
    return out;
  }

  private static String string(ByteBuffer r) {
    short n = r.getShort();
    if (n < 0) {
      return null;
    }
    byte[] b = new byte[n];
    r.get(b);
    return new String(b, StandardCharsets.UTF_8);
  }

  @Override
  public void close() throws IOException {
    socket.close();
  }
}
