package io.trustmsg.spring;

import java.time.Duration;
import org.springframework.boot.context.properties.ConfigurationProperties;

/** {@code trustmsg.*}: the producer's registration and how the starter serves it. */
@ConfigurationProperties("trustmsg")
public class TrustmsgProperties {
  /** trustmsg's base URL, e.g. http://127.0.0.1:8080. The client is made only when it is set. */
  private String url;

  /** The producer's registered id (1 to 64 of A-Z a-z 0-9 . _ -). */
  private String bizId;

  /** The producer's bearer token. */
  private String token;

  /**
   * The registration's signing secret (whsec_…): the check-back endpoint is served when it is set.
   */
  private String signingSecret;

  /**
   * Create the barrier, inbox and local message ({@code trustmsg_outbox}) tables at startup if they
   * do not exist.
   */
  private boolean createTables = false;

  private final Check check = new Check();
  private final Retry retry = new Retry();
  private final Inbox inbox = new Inbox();

  /** The check-back endpoint (Spring MVC). */
  public static class Check {
    /** Serve the endpoint (when a signing secret is set). */
    private boolean enabled = true;

    /** Its path: the registration's verify_url points here. */
    private String path = "/trustmsg/check";

    /** How far a call's webhook-timestamp may be from this clock. */
    private Duration tolerance = Duration.ofMinutes(5);

    public boolean isEnabled() {
      return enabled;
    }

    public void setEnabled(boolean enabled) {
      this.enabled = enabled;
    }

    public String getPath() {
      return path;
    }

    public void setPath(String path) {
      this.path = path;
    }

    public Duration getTolerance() {
      return tolerance;
    }

    public void setTolerance(Duration tolerance) {
      this.tolerance = tolerance;
    }
  }

  /** Retries of calls that failed on the network or with a 5xx. */
  public static class Retry {
    /** Retries after the first attempt. */
    private int maxRetries = 5;

    /** The first wait; each next one twice as long. */
    private Duration minDelay = Duration.ofMillis(100);

    /** The longest wait. */
    private Duration maxDelay = Duration.ofSeconds(5);

    public int getMaxRetries() {
      return maxRetries;
    }

    public void setMaxRetries(int maxRetries) {
      this.maxRetries = maxRetries;
    }

    public Duration getMinDelay() {
      return minDelay;
    }

    public void setMinDelay(Duration minDelay) {
      this.minDelay = minDelay;
    }

    public Duration getMaxDelay() {
      return maxDelay;
    }

    public void setMaxDelay(Duration maxDelay) {
      this.maxDelay = maxDelay;
    }
  }

  /** The consumer's inbox. */
  public static class Inbox {
    /**
     * The consumer group the inbox records processing for; spring.kafka.consumer.group-id unless
     * set.
     */
    private String group;

    public String getGroup() {
      return group;
    }

    public void setGroup(String group) {
      this.group = group;
    }
  }

  public String getUrl() {
    return url;
  }

  public void setUrl(String url) {
    this.url = url;
  }

  public String getBizId() {
    return bizId;
  }

  public void setBizId(String bizId) {
    this.bizId = bizId;
  }

  public String getToken() {
    return token;
  }

  public void setToken(String token) {
    this.token = token;
  }

  public String getSigningSecret() {
    return signingSecret;
  }

  public void setSigningSecret(String signingSecret) {
    this.signingSecret = signingSecret;
  }

  public boolean isCreateTables() {
    return createTables;
  }

  public void setCreateTables(boolean createTables) {
    this.createTables = createTables;
  }

  public Check getCheck() {
    return check;
  }

  public Retry getRetry() {
    return retry;
  }

  public Inbox getInbox() {
    return inbox;
  }
}
