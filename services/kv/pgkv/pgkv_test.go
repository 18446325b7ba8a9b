package pgkv_test

import (
	"testing"

	"github.com/logbook/logbook/internal/testenv"
	"github.com/logbook/logbook/services/kv"
	"github.com/logbook/logbook/services/kv/kvtest"
	"github.com/logbook/logbook/services/kv/pgkv"
)

func TestConformance(t *testing.T) {
	kvtest.Run(t, func(t *testing.T) kv.Backend {
		url, _ := testenv.SchemaURL(t)
		unlinkOnCleanup(t, url)
		b, err := pgkv.Open(t.Context(), url, pgkv.Options{MaxConns: 32})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}, kvtest.Full(kvtest.Options{ContendedUpdates: 40, LinearOps: 100}))
}
