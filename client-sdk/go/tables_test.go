package trustmsg

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestStatementsSplitsTheScripts(t *testing.T) {
	for _, c := range []struct {
		script string
		n      int
	}{{mysqlTables, 2}, {postgresTables, 4}, {mysqlOutbox, 1}, {postgresOutbox, 2}} {
		stmts := statements(c.script)
		if len(stmts) != c.n {
			t.Fatalf("%d statements, want %d: %q", len(stmts), c.n, stmts)
		}
		for _, s := range stmts {
			if !strings.HasPrefix(s, "CREATE ") || strings.Contains(s, "--") {
				t.Fatalf("not one clean statement: %q", s)
			}
		}
	}
}

// The embedded local message table is what the binary under test prints.
func TestOutboxSQLIsTheBinarys(t *testing.T) {
	bin := os.Getenv("TRUSTMSG_KIT_BIN")
	if bin == "" {
		t.Skip("no TRUSTMSG_KIT_BIN (run under the contract kit)")
	}
	for _, d := range []Dialect{MySQL, Postgres} {
		out, err := exec.Command(bin, "outbox", "schema", "--dialect", d.String()).Output()
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(out)) != strings.TrimSpace(OutboxSQL(d)) {
			t.Errorf("sql/outbox-%s.sql differs from `trustmsg outbox schema --dialect %s`", d, d)
		}
	}
}
