package io.trustmsg.client;

import com.fasterxml.jackson.annotation.JsonValue;

/** A producer's answer to a check-back: what its local transaction did. */
public enum Decision {
  /** The local transaction committed: the message is delivered. */
  COMMIT("commit"),
  /** The local transaction rolled back or never happened: the message is never delivered. */
  ROLLBACK("rollback"),
  /** Cannot tell yet: trustmsg asks again after its backoff. */
  UNKNOWN("unknown");

  private final String wire;

  Decision(String wire) {
    this.wire = wire;
  }

  /** The word on the wire: {@code commit}, {@code rollback} or {@code unknown}. */
  @JsonValue
  public String wire() {
    return wire;
  }
}
