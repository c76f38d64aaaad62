package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"time"
)

// othersWatch samples, once a second during a phase, whether clients other
// than the system under test are running statements on the database
// server: their work would be charged to the system's database CPU, which
// is read from the server's process.
type othersWatch struct {
	stop          context.CancelFunc
	wg            sync.WaitGroup
	samples, busy int
}

// ours names databases besides the connection's own whose statements are
// the system's (trustmsg's own database next to an outbox source).
func watchOthers(db *sql.DB, ours ...string) *othersWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &othersWatch{stop: cancel}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var n int
			args := make([]any, 0, len(ours))
			for _, d := range ours {
				args = append(args, d)
			}
			err := db.QueryRowContext(ctx,
				`SELECT COUNT(*) FROM information_schema.PROCESSLIST
				 WHERE COMMAND NOT IN ('Sleep', 'Daemon', 'Binlog Dump') AND ID <> CONNECTION_ID()
				 AND (DB IS NULL OR DB NOT IN (DATABASE()`+strings.Repeat(", ?", len(ours))+`))`, args...).Scan(&n)
			if err != nil {
				continue
			}
			w.samples++
			if n > 0 {
				w.busy++
			}
		}
	}()
	return w
}

// done stops the watch and says what it saw, "" when the server was ours.
func (w *othersWatch) done(phase string) string {
	w.stop()
	w.wg.Wait()
	if w.busy == 0 {
		return ""
	}
	return fmt.Sprintf("%s: other clients were running statements on the database server in %d of %d one-second samples (its CPU counts their work too)",
		phase, w.busy, w.samples)
}
