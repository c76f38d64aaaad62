package io.trustmsg.client;

/**
 * The producer's local transaction, run between prepare and commit: it returns a value, or throws
 * and nothing of it is committed.
 *
 * @param <R> what prepare returned
 * @param <T> the value
 * @param <X> what it may throw
 */
@FunctionalInterface
public interface LocalTransaction<R, T, X extends Exception> {
  T run(R prepared) throws X;
}
