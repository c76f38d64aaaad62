package io.trustmsg.client;

/**
 * The local transaction committed, but trustmsg refused the commit (e.g. an operator had rolled the
 * message back): the business rows are there and the message will not be delivered. Only a person
 * can reconcile this; the exception carries the local transaction's value and trustmsg's answer as
 * its cause.
 */
public class CommitRejectedException extends TrustmsgException {
  private static final long serialVersionUID = 1L;

  private final transient Object value;

  public CommitRejectedException(String messageKey, Object value, TrustmsgException cause) {
    super(
        cause.status().orElse(0),
        cause.code().orElse(null),
        "the local transaction of "
            + messageKey
            + " committed but trustmsg refused the commit: "
            + cause.getMessage(),
        cause);
    this.value = value;
  }

  /** What the local transaction returned. */
  public Object value() {
    return value;
  }
}
