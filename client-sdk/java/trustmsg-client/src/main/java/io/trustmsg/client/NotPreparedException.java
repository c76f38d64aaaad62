package io.trustmsg.client;

import java.util.Optional;

/**
 * The transaction helper ran no local work because trustmsg had already decided the message: its
 * prepare answered a status other than {@code PREPARED} (e.g. {@code VERIFY_FAILED}), or was
 * refused because the message was rolled back. The two cases a caller maps to an answer have their
 * own subclasses: {@link AlreadyCommittedException} (the order went through before) and {@link
 * AlreadyRolledBackException} (it never can). A {@link ConflictException}, so code catching that
 * still catches these.
 */
public class NotPreparedException extends ConflictException {
  private static final long serialVersionUID = 1L;

  private final String messageKey;
  private final String messageStatus;
  private final transient MessageView view;

  /**
   * @param messageStatus the message's status as trustmsg showed it ({@code COMMITTED}, {@code
   *     ROLLED_BACK}, {@code VERIFY_FAILED}, …)
   * @param view the message as trustmsg showed it, or null when there was no view (the Kafka way in
   *     answers none; a refused prepare carries none)
   */
  public NotPreparedException(
      String code,
      String messageKey,
      String messageStatus,
      MessageView view,
      String message,
      Throwable cause) {
    super(code, message, cause);
    this.messageKey = messageKey;
    this.messageStatus = messageStatus;
    this.view = view;
  }

  /** The message's status: {@code COMMITTED}, {@code ROLLED_BACK}, {@code VERIFY_FAILED}, … */
  public String messageStatus() {
    return messageStatus;
  }

  public String messageKey() {
    return messageKey;
  }

  /** The message as trustmsg last showed it, when it did. */
  public Optional<MessageView> view() {
    return Optional.ofNullable(view);
  }
}
