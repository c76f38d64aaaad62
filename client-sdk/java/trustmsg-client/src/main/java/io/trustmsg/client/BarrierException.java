package io.trustmsg.client;

import java.sql.SQLException;

/** The barrier's database failed; its {@link SQLException} is the cause. */
public class BarrierException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public BarrierException(String message, Throwable cause) {
    super(message, cause);
  }
}
