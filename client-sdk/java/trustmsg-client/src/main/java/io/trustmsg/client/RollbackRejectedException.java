package io.trustmsg.client;

/**
 * The local transaction failed (nothing of it committed) but trustmsg refused the rollback, e.g.
 * because the message had been committed: the message may be delivered without its business rows.
 * Only a person can reconcile this. The cause is the local transaction's own failure; {@link
 * #rejection()} is trustmsg's answer.
 */
public class RollbackRejectedException extends TrustmsgException {
  private static final long serialVersionUID = 1L;

  private final TrustmsgException rejection;

  public RollbackRejectedException(
      String messageKey, Throwable failure, TrustmsgException rejection) {
    super(
        rejection.status().orElse(0),
        rejection.code().orElse(null),
        "the local transaction of "
            + messageKey
            + " failed ("
            + failure
            + ") but trustmsg refused the rollback: "
            + rejection.getMessage(),
        failure);
    this.rejection = rejection;
    addSuppressed(rejection);
  }

  /** trustmsg's refusal of the rollback. */
  public TrustmsgException rejection() {
    return rejection;
  }
}
