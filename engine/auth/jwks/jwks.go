// Package jwks verifies bearer JSON Web Tokens (RFC 7519) against the
// keys an identity provider publishes as a JSON Web Key Set (RFC 7517) at
// a URL: the signature, the issuer, the audience and the times, and reads
// the token's roles from a claim. A Verifier plugs into auth.Tokens
// (auth.Tokens.SetVerifier), beside the static tokens.
//
// Only asymmetric signatures are accepted — RS256, ES256 and EdDSA — and
// only with a published public key of the matching type: "none" and the
// HMAC algorithms are refused before any key is looked at, so a token
// signed with the provider's public key used as an HMAC secret (algorithm
// confusion) is refused. The clock may be off by Config.Leeway.
//
// The key set is fetched from Config.URL only (no redirect is followed),
// over HTTPS from a server whose certificate is valid and comes from a
// CA of Config.RootCAs (a private identity provider's; default the
// system's),
// within a time limit and a size limit, then again every Config.Refresh,
// and when a token names a key the set does not hold — at most once every
// Config.MinRefresh, so that tokens naming made-up keys cannot make the
// verifier hammer the provider. A failed fetch keeps the keys held.
//
// A token verified is remembered (by its digest, up to MaxCached of them)
// until its exp, so that a client sending the same token on every request
// pays for its signature once; the memory is emptied whenever the key set
// is fetched, since a key may have been withdrawn.
//
// A refused token's reason (*auth.Refusal) names the check that failed —
// malformed, algorithm not accepted, unknown key, bad signature, expired,
// not yet valid, wrong issuer, wrong audience, no role — and never echoes
// a claim's value or a key.
package jwks

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/logbook/logbook/engine/auth"
)

// Config says whose tokens a Verifier accepts.
type Config struct {
	URL        string         // the identity provider's JWKS URL: https, or http on a loopback address
	Issuer     string         // the iss a token must carry
	Audience   string         // a value the token's aud must hold
	RolesClaim string         // the claim holding the roles (a string or an array of strings); dots walk into objects, as "realm_access.roles". Default "roles"
	Leeway     time.Duration  // clock skew allowed on exp, nbf and iat. Default 30s; at most 5m
	Refresh    time.Duration  // how often the key set is fetched again. Default 10m
	MinRefresh time.Duration  // the least time between two fetches a token's unknown key triggers. Default 30s
	Timeout    time.Duration  // a fetch's time limit. Default 5s
	MaxBytes   int64          // a key set's size limit. Default 1 MiB
	RootCAs    *x509.CertPool // the CAs the key set's https server must have its certificate from (nil: the system's); for a client of the verifier's own making only
	Client     *http.Client   // for the fetches; default a client of Timeout that follows no redirect and speaks TLS 1.2 or later, trusting RootCAs
	Logger     *slog.Logger
	Now        func() time.Time // the clock; default time.Now
}

// MaxTokenBytes bounds a token: a longer one is refused unparsed.
const MaxTokenBytes = 16 << 10

// MaxLeeway bounds Config.Leeway.
const MaxLeeway = 5 * time.Minute

// Algorithms are the signature algorithms accepted.
var Algorithms = []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.EdDSA}

// Verifier verifies tokens against a provider's key set. It implements
// auth.Verifier.
type Verifier struct {
	cfg  Config
	log  *slog.Logger
	keys atomic.Pointer[jose.JSONWebKeySet]

	fetchMu   sync.Mutex // one fetch at a time
	lastFetch time.Time  // when the last fetch began; under fetchMu
	fetches   atomic.Int64

	// verified remembers the tokens verified lately, by digest, so
	// that a client sending the same token on every request pays the
	// signature's cost once. Emptied when the key set changes, and
	// when full (MaxCached).
	mu       sync.Mutex
	verified map[[32]byte]verdict
	gen      uint64 // the key sets fetched; under mu
}

// verdict is a verified token's roles, good from its nbf (or iat) to its
// exp.
type verdict struct {
	roles     []string
	from, exp time.Time
}

// MaxCached bounds the tokens a Verifier remembers as verified.
const MaxCached = 10_000

// New checks cfg, fetches the key set once (failing if it cannot: a wrong
// URL is found when the server starts), and refreshes it every
// cfg.Refresh until ctx ends.
func New(ctx context.Context, cfg Config) (*Verifier, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	u, _ := url.Parse(cfg.URL)
	v := &Verifier{cfg: cfg, log: cfg.Logger.With("jwks", redact(u))}
	if err := v.fetch(ctx); err != nil {
		return nil, fmt.Errorf("jwks: %w", err)
	}
	go v.refreshLoop(ctx)
	return v, nil
}

func (c *Config) defaults() error {
	// Errors and logs name the URL without its query, which may carry a
	// secret.
	u, err := url.Parse(c.URL)
	if err != nil || u.Host == "" {
		return errors.New("jwks: --jwks-url: want an https:// URL")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && isLoopback(u.Hostname()):
	default:
		return fmt.Errorf("jwks: --jwks-url %s: want an https:// URL (http only on a loopback address)", redact(u))
	}
	if u.User != nil {
		return errors.New("jwks: --jwks-url must not carry a user or password")
	}
	if c.Issuer == "" {
		return errors.New("jwks: --issuer is required with --jwks-url")
	}
	if c.Audience == "" {
		return errors.New("jwks: --audience is required with --jwks-url")
	}
	if c.RolesClaim == "" {
		c.RolesClaim = "roles"
	}
	if c.Leeway < 0 || c.Leeway > MaxLeeway {
		return fmt.Errorf("jwks: --jwt-leeway %s: want 0 to %s", c.Leeway, MaxLeeway)
	}
	if c.Leeway == 0 {
		c.Leeway = 30 * time.Second
	}
	if c.Refresh <= 0 {
		c.Refresh = 10 * time.Minute
	}
	if c.MinRefresh <= 0 {
		c.MinRefresh = 30 * time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = 5 * time.Second
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = 1 << 20
	}
	if c.Client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: c.RootCAs}
		c.Client = &http.Client{
			Timeout:   c.Timeout,
			Transport: tr,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return errors.New("the key set URL redirects; give the final URL")
			},
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// redact returns u without its user information and query.
func redact(u *url.URL) string {
	r := *u
	r.User, r.RawQuery, r.ForceQuery, r.Fragment = nil, "", false, ""
	return r.String()
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Fetches is how many times the key set was fetched (or tried).
func (v *Verifier) Fetches() int64 { return v.fetches.Load() }

func (v *Verifier) refreshLoop(ctx context.Context) {
	t := time.NewTicker(v.cfg.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := v.fetch(ctx); err != nil {
				v.log.Warn("key set not refreshed; keeping the keys held", "err", err)
			}
		}
	}
}

// fetch gets the key set and, if it is one, makes it the keys.
func (v *Verifier) fetch(ctx context.Context) error {
	v.fetchMu.Lock()
	defer v.fetchMu.Unlock()
	return v.fetchLocked(ctx)
}

func (v *Verifier) fetchLocked(ctx context.Context) error {
	v.lastFetch = v.cfg.Now()
	v.fetches.Add(1)
	ctx, cancel := context.WithTimeout(ctx, v.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.cfg.URL, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := v.cfg.Client.Do(req)
	if err != nil {
		// Not the *url.Error, whose message shows the whole URL.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("fetch key set from %s: %w", redact(req.URL), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetch key set: %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, v.cfg.MaxBytes+1))
	if err != nil {
		return fmt.Errorf("fetch key set: %w", err)
	}
	if int64(len(body)) > v.cfg.MaxBytes {
		return fmt.Errorf("fetch key set: longer than %d bytes", v.cfg.MaxBytes)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return fmt.Errorf("key set: %w", err)
	}
	// Only public signing keys of the accepted kinds: a symmetric key
	// ("oct") or a private one in a published set is a mistake, and is
	// not used.
	keys := set.Keys[:0]
	for _, k := range set.Keys {
		if k.IsPublic() && k.Valid() && (k.Use == "" || k.Use == "sig") && kindOf(k.Key) != "" {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return errors.New("key set holds no RSA, P-256 or Ed25519 public signing key")
	}
	set.Keys = keys
	v.keys.Store(&set)
	v.mu.Lock()
	v.verified = nil // a key may have been withdrawn
	v.gen++
	v.mu.Unlock()
	v.log.Debug("key set fetched", "keys", len(keys))
	return nil
}

// kindOf returns the algorithm a public key signs with, or "".
func kindOf(key any) jose.SignatureAlgorithm {
	switch k := key.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() >= 2048 {
			return jose.RS256
		}
	case *ecdsa.PublicKey:
		if k.Curve == elliptic.P256() {
			return jose.ES256
		}
	case ed25519.PublicKey:
		return jose.EdDSA
	}
	return ""
}

func refuse(reason string) error {
	return &auth.Refusal{Status: http.StatusUnauthorized, Reason: reason}
}

// The reasons a token is refused.
var (
	ErrMalformed   = refuse("malformed token: not a signed JSON Web Token")
	ErrAlgorithm   = refuse("token signed with an algorithm not accepted (RS256, ES256 or EdDSA)")
	ErrUnknownKey  = refuse("token signed with a key the issuer does not publish")
	ErrSignature   = refuse("token signature does not verify")
	ErrExpired     = refuse("token expired")
	ErrNoExpiry    = refuse("token has no expiry (exp)")
	ErrNotYet      = refuse("token not valid yet (nbf)")
	ErrIssuedLater = refuse("token issued in the future (iat)")
	ErrIssuer      = refuse("token from another issuer")
	ErrAudience    = refuse("token for another audience")
	ErrNoRoles     = &auth.Refusal{Status: http.StatusForbidden, Reason: "the token carries no roles claim"}
	ErrRolesType   = &auth.Refusal{Status: http.StatusForbidden, Reason: "the token's roles claim is not a string or an array of strings"}
)

// Verify returns the roles token carries if it is a valid token of the
// configured issuer and audience, or why it is not (an *auth.Refusal).
func (v *Verifier) Verify(token string) ([]string, error) {
	if len(token) > MaxTokenBytes {
		return nil, ErrMalformed
	}
	digest := sha256.Sum256([]byte(token))
	v.mu.Lock()
	c, ok := v.verified[digest]
	gen := v.gen
	v.mu.Unlock()
	if ok {
		now := v.cfg.Now()
		switch {
		case now.After(c.exp.Add(v.cfg.Leeway)):
			return nil, ErrExpired
		case now.Before(c.from.Add(-v.cfg.Leeway)):
			return nil, ErrNotYet
		}
		return c.roles, nil
	}
	// The algorithm the header names, checked before go-jose parses the
	// token (which checks it too), to say which check failed.
	head, _, ok := strings.Cut(token, ".")
	if !ok {
		return nil, ErrMalformed
	}
	hb, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return nil, ErrMalformed
	}
	var h struct {
		Alg string `json:"alg"`
	}
	if json.Unmarshal(hb, &h) != nil {
		return nil, ErrMalformed
	}
	alg := jose.SignatureAlgorithm(h.Alg)
	if !slices.Contains(Algorithms, alg) {
		return nil, ErrAlgorithm
	}
	tok, err := jwt.ParseSigned(token, Algorithms)
	if err != nil || len(tok.Headers) != 1 {
		return nil, ErrMalformed
	}
	key, err := v.key(tok.Headers[0].KeyID, alg)
	if err != nil {
		return nil, err
	}
	var std jwt.Claims
	var rest map[string]any
	if err := tok.Claims(key, &std, &rest); err != nil {
		if errors.Is(err, jose.ErrCryptoFailure) {
			return nil, ErrSignature
		}
		return nil, ErrMalformed
	}
	if std.Expiry == nil {
		return nil, ErrNoExpiry
	}
	err = std.ValidateWithLeeway(jwt.Expected{Issuer: v.cfg.Issuer, AnyAudience: jwt.Audience{v.cfg.Audience}, Time: v.cfg.Now()}, v.cfg.Leeway)
	switch {
	case err == nil:
	case errors.Is(err, jwt.ErrExpired):
		return nil, ErrExpired
	case errors.Is(err, jwt.ErrNotValidYet):
		return nil, ErrNotYet
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return nil, ErrIssuedLater
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return nil, ErrIssuer
	case errors.Is(err, jwt.ErrInvalidAudience):
		return nil, ErrAudience
	default:
		return nil, ErrMalformed
	}
	rs, err := roles(rest, v.cfg.RolesClaim)
	if err != nil {
		return nil, err
	}
	var from time.Time
	if std.NotBefore != nil {
		from = std.NotBefore.Time()
	}
	if std.IssuedAt != nil && std.IssuedAt.Time().After(from) {
		from = std.IssuedAt.Time()
	}
	v.mu.Lock()
	// Not if the key set changed while this token was verified: its key
	// may be gone.
	if gen == v.gen {
		if len(v.verified) >= MaxCached || v.verified == nil {
			v.verified = make(map[[32]byte]verdict)
		}
		v.verified[digest] = verdict{rs, from, std.Expiry.Time()}
	}
	v.mu.Unlock()
	return rs, nil
}

// key returns the public key of id for alg: from the keys held, or, if
// they have none of that id, from the key set fetched again — unless it
// was fetched less than MinRefresh ago.
func (v *Verifier) key(id string, alg jose.SignatureAlgorithm) (any, error) {
	if k, ok := v.lookup(id, alg); ok {
		return k, nil
	}
	v.fetchMu.Lock()
	defer v.fetchMu.Unlock()
	// Another request may have fetched the key set while this one waited.
	if k, ok := v.lookup(id, alg); ok {
		return k, nil
	}
	if v.cfg.Now().Sub(v.lastFetch) < v.cfg.MinRefresh {
		return nil, ErrUnknownKey
	}
	if err := v.fetchLocked(context.Background()); err != nil {
		v.log.Warn("key set not refreshed for a token's unknown key; keeping the keys held", "err", err)
		return nil, ErrUnknownKey
	}
	if k, ok := v.lookup(id, alg); ok {
		return k, nil
	}
	return nil, ErrUnknownKey
}

// lookup finds the key of id whose type signs with alg. A token without a
// key id may use the set's only key.
func (v *Verifier) lookup(id string, alg jose.SignatureAlgorithm) (any, bool) {
	set := v.keys.Load()
	if set == nil {
		return nil, false
	}
	var cands []jose.JSONWebKey
	if id == "" {
		if len(set.Keys) == 1 {
			cands = set.Keys
		}
	} else {
		cands = set.Key(id)
	}
	for _, k := range cands {
		if kindOf(k.Key) == alg && (k.Algorithm == "" || k.Algorithm == string(alg)) {
			return k.Key, true
		}
	}
	return nil, false
}

// roles reads the roles claim: a string, or an array of strings.
func roles(claims map[string]any, path string) ([]string, error) {
	var v any = claims
	for part := range strings.SplitSeq(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, ErrNoRoles
		}
		if v, ok = m[part]; !ok {
			return nil, ErrNoRoles
		}
	}
	switch r := v.(type) {
	case string:
		return strings.Fields(r), nil
	case []any:
		out := make([]string, 0, len(r))
		for _, e := range r {
			s, ok := e.(string)
			if !ok {
				return nil, ErrRolesType
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, ErrRolesType
}
