package io.trustmsg.testkit;

import com.sun.net.httpserver.HttpServer;
import io.trustmsg.client.CheckBackHandler;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.concurrent.Executors;

/** The SDK's check-back handler served for real, by the JDK's HTTP server on 127.0.0.1. */
public final class CheckServer implements AutoCloseable {
  private final HttpServer server;

  /** Listens at once (its URL is known before the producer's secret is). */
  public CheckServer() throws IOException {
    server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.setExecutor(Executors.newFixedThreadPool(4));
    server.start();
  }

  public CheckServer(CheckBackHandler handler) throws IOException {
    this();
    serve(handler);
  }

  /** Serves {@code handler} at {@link CheckBackHandler#DEFAULT_PATH}. */
  public CheckServer serve(CheckBackHandler handler) {
    server.createContext(CheckBackHandler.DEFAULT_PATH, handler);
    return this;
  }

  public String url() {
    return "http://127.0.0.1:" + server.getAddress().getPort() + CheckBackHandler.DEFAULT_PATH;
  }

  @Override
  public void close() {
    server.stop(0);
    ((java.util.concurrent.ExecutorService) server.getExecutor()).shutdownNow();
  }
}
