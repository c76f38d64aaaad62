package io.trustmsg.client;

import java.sql.Connection;

/**
 * Work done on the connection of a transaction the SDK opened (the barrier's, the inbox's): every
 * statement on {@code connection} commits or rolls back with the marker or inbox row. Do not
 * commit, roll back or close the connection yourself.
 *
 * @param <T> the value
 * @param <X> what it may throw
 */
@FunctionalInterface
public interface JdbcWork<T, X extends Exception> {
  T run(Connection connection) throws X;
}
