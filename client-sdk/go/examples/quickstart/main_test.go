package main

import (
	"context"
	"testing"

	"github.com/trustmsg/trustmsg/client-sdk/go/internal/kittest"
)

// The README's example runs against the kit's trustmsg and MariaDB, twice
// with the same order id: the second run is a retry and must not fail.
func TestQuickstart(t *testing.T) {
	e := kittest.Kit(t)
	p := kittest.Register(t, e, "quickstart", "", 60000, "")
	t.Setenv("TRUSTMSG_URL", e.URL)
	t.Setenv("TRUSTMSG_DEMO_BIZ_ID", p.BizID)
	t.Setenv("TRUSTMSG_DEMO_TOKEN", p.Token)
	dsn, err := kittest.MySQLDSN(e.MySQLURL)
	if err != nil {
		t.Fatal(err)
	}
	id := kittest.Random()
	for range 2 {
		kittest.WithDDL(func() { err = run(context.Background(), dsn, id) })
		if err != nil {
			t.Fatal(err)
		}
	}
}
