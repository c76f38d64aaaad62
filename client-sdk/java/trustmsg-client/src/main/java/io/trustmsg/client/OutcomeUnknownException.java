package io.trustmsg.client;

/**
 * The local COMMIT failed in a way that leaves its outcome unknown (the connection dropped during
 * it) and the barrier could not be read either. No decision is sent: check-back will read the
 * barrier once the database answers.
 */
public class OutcomeUnknownException extends BarrierException {
  private static final long serialVersionUID = 1L;

  public OutcomeUnknownException(String message, Throwable cause) {
    super(message, cause);
  }
}
