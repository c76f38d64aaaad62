package io.trustmsg.client;

/**
 * The message was rolled back before: prepare was refused ({@code 409 already_rolled_back}, or
 * {@code rolled_back} for a key rolled back before any prepare), prepare answered {@code
 * ROLLED_BACK} (an older trustmsg), or the barrier held the rollback marker (the helper then sent
 * the rollback itself). The local work did not run. This message key can never be committed: an
 * order service answers "refused" (409), never "try again".
 */
public class AlreadyRolledBackException extends NotPreparedException {
  private static final long serialVersionUID = 1L;

  public AlreadyRolledBackException(
      String messageKey, MessageView view, String why, Throwable cause) {
    super(
        "already_rolled_back",
        messageKey,
        "ROLLED_BACK",
        view,
        "message " + messageKey + " was rolled back before (" + why + "); no local work ran",
        cause);
  }
}
