package testenv

import (
	"crypto/tls"
	"io"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/logbook/logbook/internal/devca"
)

// PostgresCertStandIn plays a PostgreSQL server's part up to the TLS
// handshake, for tests of certificates no real server will serve (an
// expired one): it answers a client's SSLRequest with 'S' and shakes
// hands with a certificate for 127.0.0.1 issued by ca, valid until
// notAfter. It returns a verify-full URL to it that trusts caFile (ca's
// certificate). A client that passes the handshake then fails only on
// the missing server behind it. The listener closes when the test ends.
func PostgresCertStandIn(t testing.TB, ca *devca.CA, caFile string, notAfter time.Time) string {
	t.Helper()
	pair, err := ca.Issue(devca.Leaf{Name: "127.0.0.1", Hosts: []string{"127.0.0.1"}, NotBefore: notAfter.Add(-48 * time.Hour), NotAfter: notAfter})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := pair.TLS()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				req := make([]byte, 8) // length 8, code 80877103
				if _, err := io.ReadFull(c, req); err != nil {
					return
				}
				if _, err := c.Write([]byte{'S'}); err != nil {
					return
				}
				_ = tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}}).Handshake()
			}()
		}
	}()
	return "postgres://logbook@" + ln.Addr().String() + "/logbook?connect_timeout=5&sslmode=verify-full&sslrootcert=" + url.QueryEscape(caFile)
}
