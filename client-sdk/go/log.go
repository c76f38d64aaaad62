package trustmsg

import (
	"context"
	"errors"
	"log/slog"
)

// WithLogger makes the [Barrier], [Inbox], [Transaction] (through its
// barrier) and [CheckHandler] log to l instead of [slog.Default]. A
// [Client] and an [Admin] log nothing (their errors are returned). The SDK
// logs only what the caller cannot see in a returned error: a decision
// left to check-back, a rollback that failed, a check-back answered or
// refused. A failure whose cause is a context the caller (or trustmsg's
// check-back call) ended is logged at Info, not Error: it was asked for.
//
// slog.New(slog.DiscardHandler) silences the SDK.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// loggerOf is the logger opts set, else slog.Default.
func loggerOf(opts []Option) *slog.Logger {
	var c config
	for _, o := range opts {
		o(&c)
	}
	if c.log == nil {
		return slog.Default()
	}
	return c.log
}

// ended reports whether err (or ctx) says a context ended: the caller's
// deadline or cancellation, not a fault.
func ended(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// logFailure logs msg at level, or at Info when err is the end of ctx.
func logFailure(ctx context.Context, l *slog.Logger, level slog.Level, msg string, err error, attrs ...any) {
	if ended(ctx, err) {
		level = slog.LevelInfo
		attrs = append(attrs, "context_ended", true)
	}
	l.Log(ctx, level, msg, append(attrs, "error", err)...)
}
