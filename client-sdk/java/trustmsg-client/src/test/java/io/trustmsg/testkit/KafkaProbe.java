package io.trustmsg.testkit;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import org.junit.jupiter.api.Assumptions;

/**
 * Whether kafka-clients can talk to the kit's broker: it sends ApiVersions v4 first (as
 * kafka-clients 3.9 does) and checks that an UNSUPPORTED_VERSION answer is one kafka-clients
 * parses. librdkafka's mock cluster (at least up to the version trustmsg links) answers with a
 * compact array whose count says 0 entries but which carries one (ApiVersions 0..2); kafka-clients
 * then reads that entry's first four bytes (00 12 00 00) as throttle_time_ms = 1179648 and mutes
 * the broker for ~19.7 minutes ("Give up sending metadata request since no node is available").
 */
public final class KafkaProbe {
  private static String verdict;

  private KafkaProbe() {}

  /** Null when kafka-clients can work with the kit's broker, else why not. */
  public static synchronized String javaClientProblem() {
    if (verdict == null) {
      verdict = probe();
    }
    return verdict.isEmpty() ? null : verdict;
  }

  /** Skips a test that needs kafka-clients against the kit's broker, saying exactly why. */
  public static void assumeJavaClientWorks() {
    String problem = javaClientProblem();
    if (problem != null) {
      System.err.println("KIT KAFKA: " + problem);
    }
    Assumptions.assumeTrue(problem == null, problem);
  }

  private static String probe() {
    String first = Kit.kafka().split(",")[0];
    int colon = first.lastIndexOf(':');
    try (Socket s =
        new Socket(first.substring(0, colon), Integer.parseInt(first.substring(colon + 1)))) {
      s.setSoTimeout(10_000);
      byte[] client = "probe".getBytes(StandardCharsets.UTF_8);
      byte[] sw = "java".getBytes(StandardCharsets.UTF_8);
      byte[] sv = "3.9".getBytes(StandardCharsets.UTF_8);
      ByteBuffer req =
          ByteBuffer.allocate(
              4 + 2 + 2 + 4 + 2 + client.length + 1 + 1 + sw.length + 1 + sv.length + 1);
      req.putInt(req.capacity() - 4).putShort((short) 18).putShort((short) 4).putInt(1);
      req.putShort((short) client.length).put(client).put((byte) 0);
      req.put((byte) (sw.length + 1)).put(sw).put((byte) (sv.length + 1)).put(sv).put((byte) 0);
      OutputStream out = s.getOutputStream();
      out.write(req.array());
      out.flush();
      DataInputStream in = new DataInputStream(s.getInputStream());
      byte[] answer = new byte[in.readInt()];
      in.readFully(answer);
      ByteBuffer b = ByteBuffer.wrap(answer);
      b.getInt();
      short error = b.getShort();
      if (error != 35) {
        return "";
      }
      // Version 0's shape, as KIP-511 says a broker answers a version it does not implement
      // (what trustmsg dev sends since it answers for the mock): kafka-clients falls back to
      // parsing it at version 0 and retries at the broker's highest version.
      if (b.remaining() >= 4) {
        int v0Count = b.getInt(b.position());
        if (v0Count > 0 && b.remaining() == 4 + v0Count * 6) {
          return "";
        }
      }
      int count = (b.get() & 0xff) - 1; // compact array: N+1
      int entryBytes = count * 7; // api_key, min, max (int16 each) and an empty tag buffer
      int left = b.remaining() - entryBytes;
      if (count >= 0 && left == 4 + 1) {
        return "";
      }
      return "kafka-clients cannot use the kit's broker: it answers ApiVersions v4 with UNSUPPORTED_VERSION "
          + "and the body "
          + HexFormat.ofDelimiter(" ").formatHex(answer)
          + " (a compact array of "
          + count
          + " entries followed by "
          + b.remaining()
          + " bytes); kafka-clients reads throttle_time_ms from the stray entry and mutes the broker";
    } catch (IOException e) {
      return "the kit's broker did not answer ApiVersions: " + e;
    }
  }
}
