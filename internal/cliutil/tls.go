package cliutil

import (
	"crypto/tls"

	"github.com/spf13/pflag"

	"github.com/logbook/logbook/engine/server"
)

// TLSFlags are the TLS flags of every serving command: --tls-cert and
// --tls-key make it serve HTTPS, --tls-client-ca asks its clients for
// certificates (mutual TLS).
type TLSFlags struct {
	Cert, Key, ClientCA string
}

// Register registers --tls-cert, --tls-key and --tls-client-ca on fs.
func (f *TLSFlags) Register(fs *pflag.FlagSet) {
	fs.StringVar(&f.Cert, "tls-cert", "", "serve HTTPS with this certificate (PEM; reloaded on SIGHUP or when the file changes); needs --tls-key")
	fs.StringVar(&f.Key, "tls-key", "", "private key (PEM) of --tls-cert")
	fs.StringVar(&f.ClientCA, "tls-client-ca", "", "mutual TLS: clients must present a certificate signed by a CA of this PEM file; a URI name logbook-role:ROLE in it stands for a token of that role")
	FromEnv(fs, "tls-cert")
	FromEnv(fs, "tls-key")
	FromEnv(fs, "tls-client-ca")
}

// Config checks the flags and their files and returns the server's TLS
// setting: nil for plain HTTP. A certificate without a key (or the
// reverse), a client CA without a certificate, a file that cannot be read
// or a key that does not match its certificate is bad usage.
func (f *TLSFlags) Config() (*server.TLSConfig, error) {
	switch {
	case f.Cert == "" && f.Key == "" && f.ClientCA == "":
		return nil, nil
	case f.Cert == "" || f.Key == "":
		return nil, Usage("--tls-cert and --tls-key go together: give both, or neither for plain HTTP")
	}
	cfg := &server.TLSConfig{CertFile: f.Cert, KeyFile: f.Key, ClientCAFile: f.ClientCA}
	if err := cfg.Check(); err != nil {
		return nil, Usagef("--tls-cert/--tls-key/--tls-client-ca: %v", err)
	}
	return cfg, nil
}

// ClientTLSFlags are a client's TLS flags toward a logbook server: the CA
// that signs the server's certificate, and the client's own certificate
// for a server that asks for one. A prefix names them: "follow" gives
// --follow-ca, --follow-cert and --follow-key; "" gives --ca, --cert and
// --key.
type ClientTLSFlags struct {
	CA, Cert, Key string
	names         string // "--ca/--cert/--key", for errors
}

// Register registers the flags on fs under prefix; what says whom the
// client speaks to, for their help.
func (f *ClientTLSFlags) Register(fs *pflag.FlagSet, prefix, what string) {
	if prefix != "" {
		prefix += "-"
	}
	f.names = "--" + prefix + "ca/--" + prefix + "cert/--" + prefix + "key"
	fs.StringVar(&f.CA, prefix+"ca", "", "verify the certificate of "+what+" against the CAs of this PEM file (default: the system's)")
	fs.StringVar(&f.Cert, prefix+"cert", "", "client certificate (PEM) to present to "+what+", for mutual TLS; needs --"+prefix+"key")
	fs.StringVar(&f.Key, prefix+"key", "", "private key (PEM) of --"+prefix+"cert")
}

// Set says whether any of the flags is given.
func (f *ClientTLSFlags) Set() bool { return f.CA != "" || f.Cert != "" || f.Key != "" }

// Config checks the flags and their files and returns the client's TLS
// configuration (nil when no flag is given: Go's defaults). A bad file,
// or a certificate without its key, is bad usage.
func (f *ClientTLSFlags) Config() (*tls.Config, error) {
	if !f.Set() {
		return nil, nil
	}
	tc, err := server.ClientTLS(f.CA, f.Cert, f.Key)
	if err != nil {
		return nil, Usagef("%s: %v", f.names, err)
	}
	return tc, nil
}
