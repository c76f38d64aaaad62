package io.trustmsg.client;

/**
 * The barrier already holds a marker for this message: a check-back answered {@link
 * Decision#ROLLBACK} before the local transaction could insert its marker (the transaction is
 * rolled back, the message is not delivered), or the message was already committed ({@link
 * Decision#COMMIT}, e.g. the same key used again).
 */
public class AlreadyDecidedException extends BarrierException {
  private static final long serialVersionUID = 1L;

  private final Decision decision;

  public AlreadyDecidedException(String bizId, String messageKey, Decision decision) {
    super(
        "the barrier already holds a "
            + decision.wire()
            + " marker for "
            + bizId
            + "/"
            + messageKey,
        null);
    this.decision = decision;
  }

  public Decision decision() {
    return decision;
  }
}
