package io.trustmsg.testkit;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * A {@code trustmsg dev} of the test's own, as a newcomer starts it: {@code dev --data <tmp>
 * --listen 127.0.0.1:0 --kafka-listen 127.0.0.1:0 [-- serve flags]}, its SQLite store and
 * in-process Kafka broker (librdkafka's mock cluster); read through the env file it writes. {@link
 * #close} ends that process (by its handle: its pid) and removes the directory.
 */
public final class DevServer implements AutoCloseable {
  private final Process process;
  private final Path data;
  private final Map<String, String> env;

  private DevServer(Process process, Path data, Map<String, String> env) {
    this.process = process;
    this.data = data;
    this.env = env;
  }

  /** The binary: the kit's, else {@code $TRUSTMSG_BIN}; the test is skipped without either. */
  public static String binary() {
    String bin = System.getenv("TRUSTMSG_KIT_BIN");
    if (bin == null || bin.isEmpty()) {
      bin = System.getenv("TRUSTMSG_BIN");
    }
    if (bin == null || bin.isEmpty()) {
      Kit.require();
      bin = Kit.env("TRUSTMSG_KIT_BIN");
    }
    return bin;
  }

  /**
   * Starts {@code trustmsg dev}, with {@code serveFlags} after {@code --}, and waits for its env.
   */
  public static DevServer start(String... serveFlags) throws IOException, InterruptedException {
    Path data = Files.createTempDirectory("trustmsg-java-dev-");
    List<String> argv =
        new ArrayList<>(
            List.of(
                binary(),
                "dev",
                "--data",
                data.toString(),
                "--listen",
                "127.0.0.1:0",
                "--kafka-listen",
                "127.0.0.1:0"));
    if (serveFlags.length > 0) {
      argv.add("--");
      argv.addAll(List.of(serveFlags));
    }
    Process p =
        new ProcessBuilder(argv)
            .redirectErrorStream(true)
            .redirectOutput(data.resolve("dev.log").toFile())
            .start();
    Path envFile = data.resolve("env");
    long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
    while (!Files.exists(envFile)) {
      if (!p.isAlive() || System.nanoTime() > deadline) {
        String log = Files.readString(data.resolve("dev.log"));
        p.destroyForcibly();
        throw new AssertionError("trustmsg dev did not start:\n" + log);
      }
      Thread.sleep(100);
    }
    Thread.sleep(100); // the file is written whole, but give a partial write a moment
    Map<String, String> env = new HashMap<>();
    for (String line : Files.readAllLines(envFile)) {
      if (line.startsWith("export ")) {
        String[] kv = line.substring("export ".length()).split("=", 2);
        env.put(kv[0], kv[1].replaceAll("^'|'$", ""));
      }
    }
    return new DevServer(p, data, env);
  }

  /** A value of its env file ({@code TRUSTMSG_URL}, {@code TRUSTMSG_BROKERS}, …). */
  public String env(String name) {
    String v = env.get(name);
    if (v == null) {
      throw new AssertionError("trustmsg dev's env has no " + name + ": " + env.keySet());
    }
    return v;
  }

  public String url() {
    return env("TRUSTMSG_URL");
  }

  public String brokers() {
    return env("TRUSTMSG_BROKERS");
  }

  /** Registers a producer allowed the topics {@code topicPattern} (e.g. {@code orders.*}). */
  public Kit.Producer register(String bizId, String topicPattern) {
    var body = Kit.JSON.createObjectNode();
    body.put("verify_url", "http://127.0.0.1:9/unused");
    body.putArray("topics").add(topicPattern);
    var answer =
        Kit.send(
            "PUT",
            url() + "/v1/producers/" + bizId,
            body.toString(),
            Map.of("authorization", "Bearer " + env("TRUSTMSG_ADMIN_TOKEN")),
            201);
    return new Kit.Producer(
        bizId, answer.get("token").asText(), answer.get("signing_secret").asText());
  }

  /** The end of its log, for a failure's message. */
  public String log() {
    try {
      String all = Files.readString(data.resolve("dev.log"));
      return all.length() > 4000 ? all.substring(all.length() - 4000) : all;
    } catch (IOException e) {
      return "(no log: " + e + ")";
    }
  }

  @Override
  public void close() throws IOException {
    process.destroy();
    try {
      if (!process.waitFor(10, java.util.concurrent.TimeUnit.SECONDS)) {
        process.destroyForcibly();
        process.waitFor(10, java.util.concurrent.TimeUnit.SECONDS);
      }
    } catch (InterruptedException e) {
      process.destroyForcibly();
      Thread.currentThread().interrupt();
    }
    try (Stream<Path> all = Files.walk(data)) {
      all.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
    }
  }
}
