package io.trustmsg.client;

/**
 * The message was already committed: prepare answered {@code COMMITTED}, or the barrier already
 * held the commit marker of an earlier attempt whose decision never reached trustmsg (the helper
 * then sent the commit itself). The local work did not run again; the earlier attempt's rows are
 * there. An order service answers "already placed".
 *
 * <p>{@link #view()} is trustmsg's answer: to prepare, or to the commit the helper sent (absent
 * when that commit could not be delivered: check-back commits the message, or with the Kafka way
 * in).
 */
public class AlreadyCommittedException extends NotPreparedException {
  private static final long serialVersionUID = 1L;

  public AlreadyCommittedException(String messageKey, MessageView view, String why) {
    this(messageKey, view, why, null);
  }

  /**
   * @param cause the barrier's {@link AlreadyDecidedException} when its commit marker said so (with
   *     this attempt's own failure suppressed in it, if its work failed while another request of
   *     the same key committed)
   */
  public AlreadyCommittedException(
      String messageKey, MessageView view, String why, Throwable cause) {
    super(
        "already_committed",
        messageKey,
        "COMMITTED",
        view,
        "message " + messageKey + " is already committed (" + why + "); no local work ran",
        cause);
  }
}
