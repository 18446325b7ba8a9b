package kafkabus

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// PasswordEnv is the environment variable a SASL password is read from
// when the bus URL names no sasl_password_file. Either keeps the password
// out of argv, where ps would show it.
const PasswordEnv = "LOGBOOK_BUS_PASSWORD"

// The SASL mechanisms a bus URL may name.
const (
	ScramSHA512 = "SCRAM-SHA-512"
	ScramSHA256 = "SCRAM-SHA-256"
	Plain       = "PLAIN"
)

// Security says how a client proves who the brokers are and who it is: the
// TLS and SASL half of a bus URL. The zero value is plaintext with no
// authentication.
type Security struct {
	// TLS dials the brokers over TLS, verifying their certificates
	// against CAFile (the system's roots when empty) and the host name
	// (ServerName when set, otherwise the broker's host).
	TLS        bool
	CAFile     string
	ServerName string
	// CertFile and KeyFile are a client certificate, for a listener that
	// requires one (ssl.client.auth=required). Read at every handshake,
	// so a renewed certificate is picked up without a restart.
	CertFile, KeyFile string
	// SASL is the mechanism (ScramSHA512, ScramSHA256 or Plain), empty
	// for none; User the name it authenticates as.
	SASL string
	User string
	// PasswordFile holds the password (one line; a trailing newline is
	// dropped). Read at every authentication, so a rotated password is
	// used on the next connection. When empty the password comes from
	// PasswordEnv.
	PasswordFile string
}

// queryKeys are the parameters a bus URL may carry.
var queryKeys = map[string]bool{
	"tls": true, "tls_ca": true, "tls_cert": true, "tls_key": true, "tls_server_name": true,
	"sasl": true, "sasl_user": true, "sasl_password_file": true,
}

// parseSecurity reads the TLS and SASL parameters of a bus URL.
func parseSecurity(u *url.URL) (Security, error) {
	var s Security
	if u.User != nil {
		if _, has := u.User.Password(); has {
			return s, fmt.Errorf("a password in the URL would show in ps and logs: put it in a file named by sasl_password_file= or in %s", PasswordEnv)
		}
		s.User = u.User.Username()
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return s, errors.New("the query is not key=value pairs joined by &, with %-escapes")
	}
	for k, v := range q {
		if !queryKeys[k] {
			if strings.Contains(strings.ToLower(k), "password") {
				return s, fmt.Errorf("parameter %s: a password in the URL would show in ps and logs: put it in a file named by sasl_password_file= or in %s", k, PasswordEnv)
			}
			return s, fmt.Errorf("unknown parameter %s (want tls, tls_ca, tls_cert, tls_key, tls_server_name, sasl, sasl_user, sasl_password_file)", k)
		}
		if len(v) != 1 {
			return s, fmt.Errorf("parameter %s given %d times", k, len(v))
		}
	}
	if v := q.Get("tls"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return s, fmt.Errorf("tls=%s: want true or false", v)
		}
		s.TLS = b
	}
	s.CAFile, s.CertFile, s.KeyFile, s.ServerName = q.Get("tls_ca"), q.Get("tls_cert"), q.Get("tls_key"), q.Get("tls_server_name")
	// Naming a CA or a client certificate means TLS: a tls_ca that was
	// silently ignored would leave the bus plaintext.
	if s.CAFile != "" || s.CertFile != "" || s.ServerName != "" {
		if q.Has("tls") && !s.TLS {
			return s, errors.New("tls=false with tls_ca, tls_cert or tls_server_name: drop tls=false to dial over TLS")
		}
		s.TLS = true
	}
	if (s.CertFile == "") != (s.KeyFile == "") {
		return s, errors.New("tls_cert and tls_key go together")
	}
	if u := q.Get("sasl_user"); u != "" {
		if s.User != "" && s.User != u {
			return s, errors.New("two SASL users: one in the URL's user part, another in sasl_user")
		}
		s.User = u
	}
	s.PasswordFile = q.Get("sasl_password_file")
	if m := q.Get("sasl"); m != "" {
		s.SASL = strings.ToUpper(m)
		switch s.SASL {
		case ScramSHA512, ScramSHA256:
		case Plain:
			if !s.TLS {
				return s, errors.New("sasl=PLAIN sends the password as it is: it needs tls=true")
			}
		default:
			return s, fmt.Errorf("sasl=%s: want SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN", m)
		}
		if s.User == "" {
			return s, fmt.Errorf("sasl=%s needs a user: sasl_user= or kafka://user@host…", s.SASL)
		}
	} else if s.User != "" || s.PasswordFile != "" {
		return s, errors.New("a SASL user or password file without sasl=SCRAM-SHA-512 (or SCRAM-SHA-256, PLAIN)")
	}
	return s, nil
}

// Options returns the franz-go options that make a client dial and
// authenticate as s says. It reads the CA file, and checks that the
// client certificate and the password can be read, so that a mistake
// shows at start rather than as a broker that cannot be reached.
func (s Security) Options() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if s.TLS {
		cfg, err := s.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if s.SASL != "" {
		if _, err := s.password(); err != nil {
			return nil, err
		}
		var m sasl.Mechanism
		switch s.SASL {
		case ScramSHA512:
			m = scram.Sha512(s.scramAuth)
		case ScramSHA256:
			m = scram.Sha256(s.scramAuth)
		case Plain:
			m = plain.Plain(func(context.Context) (plain.Auth, error) {
				p, err := s.password()
				return plain.Auth{User: s.User, Pass: p}, err
			})
		default:
			return nil, fmt.Errorf("kafkabus: SASL mechanism %q: want SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN", s.SASL)
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

func (s Security) scramAuth(context.Context) (scram.Auth, error) {
	p, err := s.password()
	return scram.Auth{User: s.User, Pass: p}, err
}

// password reads the SASL password from PasswordFile or PasswordEnv. Its
// errors name where it looked, never what it found.
func (s Security) password() (string, error) {
	if s.PasswordFile != "" {
		b, err := os.ReadFile(s.PasswordFile)
		if err != nil {
			return "", fmt.Errorf("kafkabus: SASL password file: %w", err)
		}
		p := strings.TrimRight(string(b), "\r\n")
		if p == "" {
			return "", fmt.Errorf("kafkabus: SASL password file %s is empty", s.PasswordFile)
		}
		return p, nil
	}
	p := os.Getenv(PasswordEnv)
	if p == "" {
		return "", fmt.Errorf("kafkabus: sasl=%s needs a password: sasl_password_file= in the bus URL, or %s", s.SASL, PasswordEnv)
	}
	return p, nil
}

func (s Security) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.ServerName}
	if s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return nil, fmt.Errorf("kafkabus: TLS CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("kafkabus: TLS CA %s: no PEM certificate in it", s.CAFile)
		}
		cfg.RootCAs = pool
	}
	if s.CertFile != "" {
		load := func() (*tls.Certificate, error) {
			c, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
			if err != nil {
				// The error of a bad key file can quote none of it:
				// crypto/tls names the file's shape, not its bytes.
				return nil, fmt.Errorf("kafkabus: TLS client certificate %s / key %s: %w", s.CertFile, s.KeyFile, err)
			}
			return &c, nil
		}
		if _, err := load(); err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return load() }
	}
	return cfg, nil
}
