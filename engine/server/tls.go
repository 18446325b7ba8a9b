package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
)

// TLSConfig makes a server speak HTTPS (HTTP/1.1 over TLS 1.2 or later,
// with Go's choice of cipher suites). The certificate and key are read
// again when the process gets SIGHUP and when either file changes (its
// modification time or size, looked at every ReloadEvery): connections
// already open keep going, new handshakes get the new certificate. A new
// pair that does not load — unreadable, malformed, a key that does not
// match the certificate — is refused with a log line, and the old pair
// stays in use.
//
// With ClientCAFile the server asks every client for a certificate that
// this CA signed, and refuses a connection without one (mutual TLS). A
// verified client certificate may carry a role, as the URI subject
// alternative name "logbook-role:ROLE" (auth.CertRole): a request that
// sends no token is then taken as if it sent a token of that role.
type TLSConfig struct {
	// CertFile and KeyFile are the server's certificate (PEM, the chain
	// up to but not including the root) and private key (PEM).
	CertFile, KeyFile string
	// ClientCAFile, if set, is the PEM bundle of CAs that sign the
	// clients' certificates; clients must then present one.
	ClientCAFile string
	// ReloadEvery is how often the files are looked at for a change (0:
	// DefaultTLSReload; negative: only on SIGHUP).
	ReloadEvery time.Duration
}

// DefaultTLSReload is how often a server looks for a renewed certificate.
const DefaultTLSReload = 10 * time.Second

// certReloader holds a server's certificate and replaces it when asked.
type certReloader struct {
	cfg   TLSConfig
	log   *slog.Logger
	cert  atomic.Pointer[tls.Certificate]
	stamp string // the files' modification times and sizes at the last load
}

// LoadTLS checks cfg's files and returns the tls.Config a server built
// with them serves: the certificate and key load and match, the client
// CA file holds at least one certificate. Run calls it; a command calls
// it first to report a bad file as its own usage error. The certificate
// is reloaded (see TLSConfig) until ctx ends.
func LoadTLS(ctx context.Context, cfg TLSConfig, log *slog.Logger) (*tls.Config, error) {
	if log == nil {
		log = slog.Default()
	}
	if cfg.CertFile == "" || cfg.KeyFile == "" {
		return nil, errors.New("TLS needs both a certificate file and a key file")
	}
	r := &certReloader{cfg: cfg, log: log}
	if err := r.load(); err != nil {
		return nil, err
	}
	tc := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// HTTP/1.1 only: the server's connection handling (the cap,
		// pipelined answers) is HTTP/1.1's.
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return r.cert.Load(), nil
		},
	}
	if cfg.ClientCAFile != "" {
		pool, err := LoadCertPool(cfg.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("client CA: %w", err)
		}
		tc.ClientCAs = pool
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	go r.watch(ctx)
	return tc, nil
}

// Check loads cfg's files as LoadTLS does, without serving or watching
// them: a command calls it to refuse bad files before it opens anything.
func (cfg TLSConfig) Check() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no watcher
	_, err := LoadTLS(ctx, cfg, slog.New(slog.DiscardHandler))
	return err
}

// LoadCertPool reads a PEM bundle of CA certificates: a client's trust in
// a server, or a server's in its clients.
func LoadCertPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s: no PEM certificate in it", file)
	}
	return pool, nil
}

// ClientTLS is the TLS configuration of a client of a logbook server:
// it trusts the CAs of caFile (empty: the system's), and presents the
// client certificate certFile/keyFile if given (for a server that asks
// for one). Both or neither of certFile and keyFile.
func ClientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := LoadCertPool(caFile)
		if err != nil {
			return nil, err
		}
		tc.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("a client certificate needs both its certificate file and its key file")
	}
	if certFile != "" {
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{c}
	}
	return tc, nil
}

// load reads the certificate and key and, if they load and match, makes
// them the served pair.
func (r *certReloader) load() error {
	stamp := r.fileStamp()
	c, err := tls.LoadX509KeyPair(r.cfg.CertFile, r.cfg.KeyFile)
	if err != nil {
		return fmt.Errorf("certificate %s, key %s: %w", r.cfg.CertFile, r.cfg.KeyFile, err)
	}
	r.cert.Store(&c)
	r.stamp = stamp
	return nil
}

// fileStamp says when and how the files last changed.
func (r *certReloader) fileStamp() string {
	var b bytes.Buffer
	for _, f := range []string{r.cfg.CertFile, r.cfg.KeyFile} {
		if fi, err := os.Stat(f); err == nil {
			fmt.Fprintf(&b, "%d/%d;", fi.ModTime().UnixNano(), fi.Size())
		}
	}
	return b.String()
}

// watch reloads the pair on SIGHUP and when the files change, until ctx
// ends.
func (r *certReloader) watch(ctx context.Context) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	every := r.cfg.ReloadEvery
	if every == 0 {
		every = DefaultTLSReload
	}
	var tick <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			r.reload("SIGHUP")
		case <-tick:
			if r.fileStamp() != r.stamp {
				r.reload("file change")
			}
		}
	}
}

func (r *certReloader) reload(why string) {
	if err := r.load(); err != nil {
		// The files may be half-written (a renewal replaces the
		// certificate, then the key): the next change loads them again.
		r.stamp = r.fileStamp()
		r.log.Error("TLS certificate not reloaded; the old one stays in use", "reason", why, "err", err)
		return
	}
	c := r.cert.Load()
	attrs := []any{"reason", why, "cert", r.cfg.CertFile}
	if c.Leaf != nil {
		attrs = append(attrs, "subject", c.Leaf.Subject.String(), "not_after", c.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	r.log.Info("TLS certificate reloaded", attrs...)
}
