package main

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/auth/jwks"
	"github.com/logbook/logbook/engine/server"
)

// tokenFlags are the flags by which every serving command authenticates
// its callers: a token file (--tokens, reloaded when it changes and on
// SIGHUP) or LOGBOOK_TOKENS, and JSON Web Tokens of an identity provider
// (--jwks-url, --jwks-ca, --issuer, --audience, --roles-claim,
// --jwt-leeway).
type tokenFlags struct {
	file       string
	jwksURL    string
	jwksCA     string
	issuer     string
	audience   string
	rolesClaim string
	leeway     time.Duration
}

// register registers the flags on fs; roles says, for --tokens' help,
// which roles the command's service takes.
func (f *tokenFlags) register(fs *pflag.FlagSet, roles string) {
	fs.StringVar(&f.file, "tokens", "", "bearer tokens, one \"token role\" per line"+roles+"; a token may be given as its digest, sha256:<hex> (logbook token digest); reloaded when the file changes and on SIGHUP (default: LOGBOOK_TOKENS, token:role,…)")
	fs.StringVar(&f.jwksURL, "jwks-url", "", "also accept bearer JSON Web Tokens signed by a key of the identity provider's key set at this https URL (RS256, ES256 or EdDSA)")
	fromEnv(fs, "jwks-url")
	fs.StringVar(&f.jwksCA, "jwks-ca", "", "verify the certificate of --jwks-url's server against the CAs of this PEM file, for that URL only (default: the system's)")
	fromEnv(fs, "jwks-ca")
	fs.StringVar(&f.issuer, "issuer", "", "the issuer (iss) a JSON Web Token must name (required with --jwks-url)")
	fromEnv(fs, "issuer")
	fs.StringVar(&f.audience, "audience", "", "the audience (aud) a JSON Web Token must be for (required with --jwks-url)")
	fromEnv(fs, "audience")
	fs.StringVar(&f.rolesClaim, "roles-claim", "roles", "the claim of a JSON Web Token that holds its roles: a string or an array of strings; dots walk into objects (realm_access.roles)")
	fs.DurationVar(&f.leeway, "jwt-leeway", 30*time.Second, "clock skew allowed on a JSON Web Token's exp, nbf and iat (at most 5m)")
}

// load loads the tokens (the file or LOGBOOK_TOKENS), checks the JWT
// flags, and, until ctx ends, watches the file and refreshes the identity
// provider's keys. need names the roles the command's service takes, for
// the message when there is no token at all; required says that none at
// all, and no --jwks-url, is bad usage.
func (f *tokenFlags) load(ctx context.Context, log *slog.Logger, required bool, need ...auth.Role) (*auth.Tokens, error) {
	if f.jwksURL == "" && (f.issuer != "" || f.audience != "" || f.jwksCA != "") {
		return nil, usagef("--issuer, --audience and --jwks-ca are for JSON Web Tokens: give --jwks-url too")
	}
	var tokens *auth.Tokens
	var err error
	if required && f.jwksURL == "" {
		tokens, err = loadTokens(f.file, need...)
	} else {
		tokens, err = auth.Load(f.file, serviceRoles())
		if err != nil {
			err = fmt.Errorf("tokens: %w", err)
		}
	}
	if err != nil {
		return nil, err
	}
	if f.jwksURL != "" {
		if f.issuer == "" || f.audience == "" {
			return nil, usagef("--jwks-url needs --issuer and --audience: the issuer a token must name and the audience it must be for")
		}
		if f.leeway < 0 || f.leeway > jwks.MaxLeeway {
			return nil, usagef("--jwt-leeway %s: want 0 to %s", f.leeway, jwks.MaxLeeway)
		}
		var roots *x509.CertPool
		if f.jwksCA != "" {
			if roots, err = server.LoadCertPool(f.jwksCA); err != nil {
				return nil, usagef("--jwks-ca: %v", err)
			}
		}
		v, err := jwks.New(ctx, jwks.Config{URL: f.jwksURL, Issuer: f.issuer, Audience: f.audience, RolesClaim: f.rolesClaim, Leeway: f.leeway, RootCAs: roots, Logger: log})
		if err != nil {
			return nil, err
		}
		tokens.SetVerifier(v)
	}
	if f.file != "" {
		if err := tokens.Watch(ctx, f.file, log, auth.WatchOptions{}); err != nil {
			return nil, err
		}
	}
	return tokens, nil
}

// loadTokens loads a server's bearer tokens (server.LoadTokens); none at
// all is bad usage.
func loadTokens(file string, roles ...auth.Role) (*auth.Tokens, error) {
	tokens, err := server.LoadTokens(file, serviceRoles(), roles...)
	if errors.Is(err, server.ErrNoTokens) {
		return nil, usageError{Msg: err.Error()}
	}
	return tokens, err
}

// newTokenCmd is `logbook token`: what helps manage bearer tokens.
func newTokenCmd(e *env) *cobra.Command {
	digest := &cobra.Command{
		Use:   "digest",
		Short: "Print the digest of a bearer token, to put in a token file in its place",
		Long: `Reads a bearer token from standard input (not from the command line, where
ps would show it) and prints its digest, sha256:<hex>, which a token file
may hold in place of the token: the file then gives away no token.`,
		Example: `  printf '%s' "$TOKEN" | logbook token digest
  echo "$(logbook token digest < token.txt) planner" >> tokens`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), 64<<10))
			if err != nil {
				return err
			}
			sc := bufio.NewScanner(strings.NewReader(string(in)))
			var tok string
			for sc.Scan() {
				if l := strings.TrimSpace(sc.Text()); l != "" {
					if tok != "" {
						return usagef("give one token on standard input, not several lines")
					}
					tok = l
				}
			}
			if tok == "" {
				return usagef("give the token on standard input: printf '%%s' \"$TOKEN\" | logbook token digest")
			}
			if err := auth.NewTokens(nil).Add(tok, auth.Viewer); err != nil {
				// Add's error shows the token's first characters.
				return usagef("not a token a server takes: a token has at least 8 characters and no blank or control character")
			}
			_, err = fmt.Fprintln(e.stdout, auth.Digest(tok))
			return err
		},
	}
	return group("token", "Manage bearer tokens", digest)
}
