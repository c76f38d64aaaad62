package io.trustmsg.client;

import java.util.NoSuchElementException;

/**
 * What {@link Inbox#process} did with a record: the work ran and committed ({@link #isDone()}, its
 * value in {@link #value()}), or the record had been processed before and the work did not run
 * ({@link #isRepeat()}).
 */
public final class Processed<T> {
  private static final Processed<?> REPEAT = new Processed<>(false, null);

  private final boolean done;
  private final T value;

  private Processed(boolean done, T value) {
    this.done = done;
    this.value = value;
  }

  public static <T> Processed<T> done(T value) {
    return new Processed<>(true, value);
  }

  @SuppressWarnings("unchecked")
  public static <T> Processed<T> repeat() {
    return (Processed<T>) REPEAT;
  }

  public boolean isDone() {
    return done;
  }

  public boolean isRepeat() {
    return !done;
  }

  /** The work's value. */
  public T value() {
    if (!done) {
      throw new NoSuchElementException("a repeated record: the work did not run");
    }
    return value;
  }

  @Override
  public String toString() {
    return done ? "Processed.done(" + value + ")" : "Processed.repeat()";
  }
}
