package userscdc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A read waiting for the only connection slot takes it when the read
// holding it fails to import the snapshot: it is not left waiting while
// a slot is free.
func TestSnapshotReaderFreesSlotOnFailedImport(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // a server that accepts and hangs up 300 ms later
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				time.Sleep(300 * time.Millisecond)
				c.Close()
			}()
		}
	}()
	url := fmt.Sprintf("postgres://u@%s/db?sslmode=disable&connect_timeout=5", ln.Addr())
	r := newSnapshotReader(url, "public", "00000003-00000002-1", 1)
	noop := func(*pgx.Conn) error { return nil }
	first := make(chan error, 1)
	go func() { first <- r.do(context.Background(), noop) }()
	time.Sleep(50 * time.Millisecond) // the first read holds the slot, importing
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	err = r.do(ctx, noop)
	if err == nil || errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("the waiting read: %v after %v; want its own failed import, not a wait for the deadline", err, time.Since(start))
	}
	if err := <-first; err == nil {
		t.Fatal("the first read imported from a server that hangs up")
	}
	r.close()
	if err := r.do(context.Background(), noop); !errors.Is(err, errReaderClosed) {
		t.Fatalf("a read after close: %v", err)
	}
}
