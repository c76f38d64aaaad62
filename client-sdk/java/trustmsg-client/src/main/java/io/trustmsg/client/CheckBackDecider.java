package io.trustmsg.client;

/**
 * Answers a check-back: what did the local transaction of this message do? {@link Barrier} answers
 * from its marker table; give your own to answer from your business tables instead. Answer from the
 * database, never from a guess: {@link Decision#UNKNOWN} when you cannot tell yet.
 */
@FunctionalInterface
public interface CheckBackDecider {
  /**
   * @throws Exception when the decision cannot be made now: the endpoint answers 500 and trustmsg
   *     asks again later
   */
  Decision decide(CheckRequest request) throws Exception;
}
