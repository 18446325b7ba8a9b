package jwks

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/internal/devca"
)

// idp is an identity provider: it publishes the public halves of its
// keys at a loopback URL and signs tokens with them.
type idp struct {
	base  string // http://host:port or https://host:port
	mu    sync.Mutex
	keys  map[string]signingKey // by kid
	hits  atomic.Int64
	extra string // served in place of the key set, if set
}

type signingKey struct {
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
}

var (
	rsaOnce sync.Once
	rsaKeys [2]*rsa.PrivateKey
)

// rsaKey returns one of two RSA keys made once: making them is slow.
func rsaKey(t testing.TB, i int) *rsa.PrivateKey {
	rsaOnce.Do(func() {
		for j := range rsaKeys {
			k, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				panic(err)
			}
			rsaKeys[j] = k
		}
	})
	return rsaKeys[i]
}

func newIDP(t testing.TB) *idp {
	p := &idp{keys: map[string]signingKey{}}
	srv := httptest.NewServer(p.handler())
	t.Cleanup(srv.Close)
	p.base = srv.URL
	p.add("rsa-1", jose.RS256, rsaKey(t, 0))
	return p
}

// newTLSIDP is newIDP over HTTPS, with the certificate *cert holds at
// each handshake.
func newTLSIDP(t testing.TB, cert *atomic.Pointer[tls.Certificate]) *idp {
	p := &idp{keys: map[string]signingKey{}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: p.handler(), ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0),
		TLSConfig: &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cert.Load(), nil }}}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	p.base = "https://" + l.Addr().String()
	p.add("rsa-1", jose.RS256, rsaKey(t, 0))
	return p
}

func (p *idp) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.hits.Add(1)
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.extra != "" {
			_, _ = w.Write([]byte(p.extra))
			return
		}
		var set jose.JSONWebKeySet
		for kid, k := range p.keys {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.priv.Public(), KeyID: kid, Algorithm: string(k.alg), Use: "sig"})
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_ = json.NewEncoder(w).Encode(set)
	})
}

func (p *idp) add(kid string, alg jose.SignatureAlgorithm, priv crypto.Signer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys[kid] = signingKey{alg, priv}
}

func (p *idp) remove(kid string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.keys, kid)
}

// sign makes a token of claims with the key kid.
func sign(t testing.TB, alg jose.SignatureAlgorithm, priv any, kid string, claims map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader("kid", kid)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: priv}, opts)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

const (
	issuer   = "https://idp.example"
	audience = "logbook"
)

var t0 = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

func claims(mod func(map[string]any)) map[string]any {
	c := map[string]any{
		"iss": issuer, "aud": []string{audience, "other"}, "sub": "alice-subject-value",
		"iat": t0.Unix(), "nbf": t0.Unix(), "exp": t0.Add(time.Hour).Unix(),
		"roles": []string{"viewer", "editor"},
	}
	if mod != nil {
		mod(c)
	}
	return c
}

// clock is a settable time.
type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *clock) set(t time.Time)     { c.ns.Store(t.UnixNano()) }
func (c *clock) add(d time.Duration) { c.ns.Add(int64(d)) }
func newClock(t time.Time) *clock    { c := &clock{}; c.set(t); return c }
func (p *idp) url() string           { return p.base + "/jwks.json" }
func (p *idp) signRSA(t *testing.T, c map[string]any) string {
	return sign(t, jose.RS256, rsaKey(t, 0), "rsa-1", c)
}

func newVerifier(t *testing.T, p *idp, clk *clock, mod func(*Config)) *Verifier {
	t.Helper()
	cfg := Config{URL: p.url(), Issuer: issuer, Audience: audience, Now: clk.now}
	if mod != nil {
		mod(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	v, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestRefusals: each check refuses the token that fails it, with its own
// reason; the same token without the fault is accepted.
func TestRefusals(t *testing.T) {
	p := newIDP(t)
	clk := newClock(t0.Add(time.Minute))
	v := newVerifier(t, p, clk, nil)

	good := p.signRSA(t, claims(nil))
	if roles, err := v.Verify(good); err != nil || strings.Join(roles, ",") != "viewer,editor" {
		t.Fatalf("a good token: %v %v", roles, err)
	}
	rsaPub, _ := x509.MarshalPKIXPublicKey(rsaKey(t, 0).Public())
	otherKey := rsaKey(t, 1)
	tampered := func() string {
		parts := strings.Split(good, ".")
		var c map[string]any
		b, _ := base64.RawURLEncoding.DecodeString(parts[1])
		_ = json.Unmarshal(b, &c)
		c["roles"] = []string{"admin"}
		b, _ = json.Marshal(c)
		parts[1] = base64.RawURLEncoding.EncodeToString(b)
		return strings.Join(parts, ".")
	}()
	unsigned := func(alg string) string {
		h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"` + alg + `","kid":"rsa-1","typ":"JWT"}`))
		b, _ := json.Marshal(claims(nil))
		return h + "." + base64.RawURLEncoding.EncodeToString(b) + "."
	}
	for name, c := range map[string]struct {
		token string
		want  error
	}{
		"expired":        {p.signRSA(t, claims(func(c map[string]any) { c["exp"] = t0.Add(-time.Minute).Unix() })), ErrExpired},
		"no exp":         {p.signRSA(t, claims(func(c map[string]any) { delete(c, "exp") })), ErrNoExpiry},
		"not yet valid":  {p.signRSA(t, claims(func(c map[string]any) { c["nbf"] = t0.Add(10 * time.Minute).Unix() })), ErrNotYet},
		"issued later":   {p.signRSA(t, claims(func(c map[string]any) { c["iat"] = t0.Add(10 * time.Minute).Unix() })), ErrIssuedLater},
		"wrong issuer":   {p.signRSA(t, claims(func(c map[string]any) { c["iss"] = "https://evil.example" })), ErrIssuer},
		"no issuer":      {p.signRSA(t, claims(func(c map[string]any) { delete(c, "iss") })), ErrIssuer},
		"wrong audience": {p.signRSA(t, claims(func(c map[string]any) { c["aud"] = "someone-else" })), ErrAudience},
		"no audience":    {p.signRSA(t, claims(func(c map[string]any) { delete(c, "aud") })), ErrAudience},
		"unknown kid":    {sign(t, jose.RS256, otherKey, "rsa-9", claims(nil)), ErrUnknownKey},
		"alg none":       {unsigned("none"), ErrAlgorithm},
		"alg HS256 with the public key as secret": {sign(t, jose.HS256, rsaPub, "rsa-1", claims(nil)), ErrAlgorithm},
		"alg RS512":       {sign(t, jose.RS512, rsaKey(t, 0), "rsa-1", claims(nil)), ErrAlgorithm},
		"bad signature":   {tampered, ErrSignature},
		"other key":       {sign(t, jose.RS256, otherKey, "rsa-1", claims(nil)), ErrSignature},
		"no roles":        {p.signRSA(t, claims(func(c map[string]any) { delete(c, "roles") })), ErrNoRoles},
		"roles not words": {p.signRSA(t, claims(func(c map[string]any) { c["roles"] = 7 })), ErrRolesType},
		"malformed":       {"abc.def.ghi", ErrMalformed},
		"two parts":       {"abc.def", ErrMalformed},
		"too long":        {good + strings.Repeat("A", MaxTokenBytes), ErrMalformed},
	} {
		roles, err := v.Verify(c.token)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: roles %v, err %v, want %v", name, roles, err, c.want)
		}
	}
}

// TestLeeway: a token a little past its expiry, or a little before its
// nbf, is accepted within the leeway and refused beyond.
func TestLeeway(t *testing.T) {
	p := newIDP(t)
	clk := newClock(t0)
	v := newVerifier(t, p, clk, func(c *Config) { c.Leeway = 30 * time.Second })
	tok := p.signRSA(t, claims(nil))
	clk.set(t0.Add(time.Hour + 20*time.Second))
	if _, err := v.Verify(tok); err != nil {
		t.Fatalf("20s past exp, within a 30s leeway: %v", err)
	}
	clk.set(t0.Add(time.Hour + 40*time.Second))
	if _, err := v.Verify(tok); !errors.Is(err, ErrExpired) {
		t.Fatalf("40s past exp: %v", err)
	}
	clk.set(t0.Add(-20 * time.Second))
	if _, err := v.Verify(tok); err != nil {
		t.Fatalf("20s before nbf: %v", err)
	}
	clk.set(t0.Add(-40 * time.Second))
	if _, err := v.Verify(tok); !errors.Is(err, ErrNotYet) {
		t.Fatalf("40s before nbf: %v", err)
	}
	for _, l := range []time.Duration{-time.Second, MaxLeeway + time.Second} {
		if _, err := New(context.Background(), Config{URL: p.url(), Issuer: issuer, Audience: audience, Leeway: l}); err == nil {
			t.Errorf("leeway %s accepted", l)
		}
	}
}

// TestAlgorithms: ES256 and EdDSA keys work as RS256 keys do; a key is
// used only with its own algorithm.
func TestAlgorithms(t *testing.T) {
	p := newIDP(t)
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	p.add("ec-1", jose.ES256, ec)
	p.add("ed-1", jose.EdDSA, ed)
	v := newVerifier(t, p, newClock(t0), nil)
	for _, tok := range []string{sign(t, jose.ES256, ec, "ec-1", claims(nil)), sign(t, jose.EdDSA, ed, "ed-1", claims(nil))} {
		if _, err := v.Verify(tok); err != nil {
			t.Error(err)
		}
	}
	// The EC key's id on a token that claims RS256: no RSA key of that id.
	if _, err := v.Verify(sign(t, jose.RS256, rsaKey(t, 0), "ec-1", claims(nil))); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("RS256 token naming an EC key: %v", err)
	}
}

// TestKeyRotation: a key the provider adds is found when a token names
// it; one it drops stops working at the next scheduled refresh, though a
// token it signed was verified (and remembered) before.
func TestKeyRotation(t *testing.T) {
	p := newIDP(t)
	clk := newClock(t0)
	v := newVerifier(t, p, clk, func(c *Config) { c.Refresh = 50 * time.Millisecond })
	old := p.signRSA(t, claims(nil))
	// Verified, and so remembered, before its key is withdrawn.
	if _, err := v.Verify(old); err != nil {
		t.Fatal(err)
	}
	p.add("rsa-2", jose.RS256, rsaKey(t, 1))
	p.remove("rsa-1")
	rotated := sign(t, jose.RS256, rsaKey(t, 1), "rsa-2", claims(nil))
	clk.add(time.Minute) // past MinRefresh since the first fetch
	if _, err := v.Verify(rotated); err != nil {
		t.Fatalf("token of the new key: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := v.Verify(old)
		if errors.Is(err, ErrUnknownKey) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dropped key still verifies: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestUnknownKidFloodIsRateLimited: tokens naming made-up keys make the
// verifier fetch the key set at most once per MinRefresh.
func TestUnknownKidFloodIsRateLimited(t *testing.T) {
	p := newIDP(t)
	clk := newClock(t0)
	v := newVerifier(t, p, clk, nil)
	before := p.hits.Load()
	clk.add(time.Minute)
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok := sign(t, jose.RS256, rsaKey(t, 0), "bogus-"+string(rune('a'+i%26))+strings.Repeat("x", i), claims(nil))
			if _, err := v.Verify(tok); !errors.Is(err, ErrUnknownKey) {
				t.Errorf("bogus kid: %v", err)
			}
		}()
	}
	wg.Wait()
	if n := p.hits.Load() - before; n != 1 {
		t.Fatalf("%d fetches for 200 unknown kids, want 1", n)
	}
	clk.add(31 * time.Second)
	_, _ = v.Verify(sign(t, jose.RS256, rsaKey(t, 0), "bogus-again", claims(nil)))
	if n := p.hits.Load() - before; n != 2 {
		t.Fatalf("%d fetches after MinRefresh passed, want 2", n)
	}
}

// TestFetchIsBounded: the key set comes only from the URL given, within a
// size limit; a set with no usable key, a redirect, or a plain-HTTP URL
// off loopback is refused when the verifier is made.
func TestFetchIsBounded(t *testing.T) {
	p := newIDP(t)
	p.mu.Lock()
	p.extra = `{"keys":[],"pad":"` + strings.Repeat("x", 2<<20) + `"}`
	p.mu.Unlock()
	if _, err := New(context.Background(), Config{URL: p.url(), Issuer: issuer, Audience: audience}); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("an oversized key set: %v", err)
	}
	p.mu.Lock()
	p.extra = `{"keys":[{"kty":"oct","k":"c2VjcmV0LXNlY3JldC1zZWNyZXQ","kid":"h","alg":"HS256"}]}`
	p.mu.Unlock()
	if _, err := New(context.Background(), Config{URL: p.url(), Issuer: issuer, Audience: audience}); err == nil || !strings.Contains(err.Error(), "no RSA") {
		t.Errorf("a key set of a symmetric key: %v", err)
	}
	redirect := httptest.NewServer(http.RedirectHandler(p.url(), http.StatusFound))
	defer redirect.Close()
	if _, err := New(context.Background(), Config{URL: redirect.URL, Issuer: issuer, Audience: audience}); err == nil || !strings.Contains(err.Error(), "redirects") {
		t.Errorf("a redirect: %v", err)
	}
	for _, c := range []Config{
		{URL: "http://idp.example/jwks", Issuer: issuer, Audience: audience},
		{URL: "https://u:pw@idp.example/jwks", Issuer: issuer, Audience: audience},
		{URL: p.url(), Audience: audience},
		{URL: p.url(), Issuer: issuer},
	} {
		if _, err := New(context.Background(), c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// TestKeySetOverHTTPS: the key set is fetched over HTTPS from a server
// whose certificate comes from a CA of Config.RootCAs and is valid. With
// the identity provider's CA, tokens verify. A server whose certificate
// comes from another CA, or has expired, is refused: when the verifier is
// made (a server does not start), and on a later fetch, where a token
// signed with a key only that fetch would bring is answered 401 ("a key the
// issuer does not publish"), saying nothing of the certificate or the URL.
func TestKeySetOverHTTPS(t *testing.T) {
	ca, err := devca.New("identity provider CA")
	if err != nil {
		t.Fatal(err)
	}
	other, err := devca.New("another CA")
	if err != nil {
		t.Fatal(err)
	}
	issue := func(ca *devca.CA, notAfter time.Time) *tls.Certificate {
		pair, err := ca.Issue(devca.Leaf{Name: "idp", Hosts: []string{"127.0.0.1"}, NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: notAfter})
		if err != nil {
			t.Fatal(err)
		}
		c, err := pair.TLS()
		if err != nil {
			t.Fatal(err)
		}
		return &c
	}
	good := issue(ca, time.Now().Add(time.Hour))
	refused := map[string]*tls.Certificate{
		"another CA's certificate": issue(other, time.Now().Add(time.Hour)),
		"an expired certificate":   issue(ca, time.Now().Add(-time.Minute)),
	}
	var cert atomic.Pointer[tls.Certificate]
	p := newTLSIDP(t, &cert)
	cfg := func(pool *x509.CertPool) Config {
		return Config{URL: p.url(), Issuer: issuer, Audience: audience, RootCAs: pool}
	}

	// The server's certificate is the CA's and valid: without the CA
	// (the system's roots) the key set is refused; with it, fetched.
	cert.Store(good)
	if _, err := New(context.Background(), cfg(nil)); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a private CA's server, the system's roots trusted: %v", err)
	}
	for name, c := range refused {
		cert.Store(c)
		if _, err := New(context.Background(), cfg(ca.Pool())); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: %v", name, err)
		}
	}

	cert.Store(good)
	clk := newClock(t0.Add(time.Minute))
	v := newVerifier(t, p, clk, func(c *Config) { c.RootCAs = ca.Pool() })
	if roles, err := v.Verify(p.signRSA(t, claims(nil))); err != nil || len(roles) != 2 {
		t.Fatalf("a token, the key set fetched over HTTPS: %v %v", roles, err)
	}
	toks, err := auth.ParseEnv("", []auth.Role{"editor"})
	if err != nil {
		t.Fatal(err)
	}
	toks.SetVerifier(v)
	h := toks.RequireRole("editor", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p.add("ec-new", jose.ES256, ec)
	newKeyToken := sign(t, jose.ES256, ec, "ec-new", claims(nil))
	for name, c := range refused {
		cert.Store(c)
		v.cfg.Client.CloseIdleConnections() // a new handshake
		clk.add(time.Minute)                // past MinRefresh: the unknown key makes a fetch
		before := v.Fetches()
		req := httptest.NewRequest("POST", "/", nil)
		req.Header.Set("Authorization", "Bearer "+newKeyToken)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if v.Fetches() != before+1 {
			t.Errorf("%s: %d fetches, want 1", name, v.Fetches()-before)
		}
		if rec.Code != 401 || rec.Header().Get("Content-Type") != "application/problem+json" || !strings.Contains(rec.Body.String(), "a key the issuer does not publish") {
			t.Errorf("%s: %d %s %s, want 401 problem+json, a key the issuer does not publish", name, rec.Code, rec.Header().Get("Content-Type"), rec.Body)
		}
		for _, leak := range []string{"127.0.0.1", "x509", "certificate", "jwks.json"} {
			if strings.Contains(rec.Body.String(), leak) {
				t.Errorf("%s: the answer shows %q: %s", name, leak, rec.Body)
			}
		}
	}
	// The same token once the server's certificate is good again.
	cert.Store(good)
	v.cfg.Client.CloseIdleConnections()
	clk.add(time.Minute)
	if _, err := v.Verify(newKeyToken); err != nil {
		t.Errorf("the new key's token, the certificate good again: %v", err)
	}
}

// TestWithTokens: through auth.Tokens, static tokens and JWTs work side by
// side; a refused JWT is answered 401 problem+json with its reason and
// nothing of the token; a JWT without a role the service knows, 403.
func TestWithTokens(t *testing.T) {
	p := newIDP(t)
	clk := newClock(t0.Add(time.Minute))
	v := newVerifier(t, p, clk, nil)
	toks, err := auth.ParseEnv("static-editor-token:editor", []auth.Role{"editor", "admin"})
	if err != nil {
		t.Fatal(err)
	}
	toks.SetVerifier(v)
	h := toks.RequireRole("editor", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	do := func(tok string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	adminOnly := p.signRSA(t, claims(func(c map[string]any) { c["roles"] = "admin" }))
	for _, c := range []struct {
		name, tok, want string
		code            int
	}{
		{"static", "static-editor-token", "", 200},
		{"jwt", p.signRSA(t, claims(nil)), "", 200},
		{"jwt, roles as a string", p.signRSA(t, claims(func(c map[string]any) { c["roles"] = "viewer editor" })), "", 200},
		{"jwt, nested claim path absent", p.signRSA(t, claims(func(c map[string]any) { c["realm_access"] = map[string]any{"roles": []string{"editor"}} })), "", 200},
		{"jwt of another role", adminOnly, "needs a token of role editor", 403},
		{"jwt of no known role", p.signRSA(t, claims(func(c map[string]any) { c["roles"] = []string{"god-role-value"} })), "names no role this service knows", 403},
		{"expired jwt", p.signRSA(t, claims(func(c map[string]any) { c["exp"] = t0.Unix() })), "token expired", 401},
		{"wrong audience", p.signRSA(t, claims(func(c map[string]any) { c["aud"] = "aud-value-secret" })), "another audience", 401},
		{"unknown static", "not-a-token-at-all", "unknown bearer token", 401},
	} {
		rec := do(c.tok)
		if rec.Code != c.code || !strings.Contains(rec.Body.String(), c.want) {
			t.Errorf("%s: %d %s, want %d %q", c.name, rec.Code, rec.Body, c.code, c.want)
		}
		if c.code != 200 {
			if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("%s: content type %q", c.name, ct)
			}
			for _, leak := range []string{"alice-subject-value", "god-role-value", "aud-value-secret", c.tok, "BEGIN", `"n"`} {
				if strings.Contains(rec.Body.String(), leak) {
					t.Errorf("%s: the answer shows %q: %s", c.name, leak, rec.Body)
				}
			}
		}
	}
	// A nested roles claim.
	nested := newVerifier(t, p, clk, func(c *Config) { c.RolesClaim = "realm_access.roles" })
	tok := p.signRSA(t, claims(func(c map[string]any) { c["realm_access"] = map[string]any{"roles": []string{"admin"}} }))
	if roles, err := nested.Verify(tok); err != nil || len(roles) != 1 || roles[0] != "admin" {
		t.Errorf("nested roles claim: %v %v", roles, err)
	}
}

// BenchmarkVerify: what a JWT costs a request, per algorithm, the first
// time and once remembered, beside a static token's lookup.
func BenchmarkVerify(b *testing.B) {
	t := b
	p := newIDP(t)
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	p.add("ec-1", jose.ES256, ec)
	p.add("ed-1", jose.EdDSA, ed)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	v, err := New(ctx, Config{URL: p.url(), Issuer: issuer, Audience: audience, Now: newClock(t0).now})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		alg  jose.SignatureAlgorithm
		key  any
		kid  string
	}{{"RS256", jose.RS256, rsaKey(t, 0), "rsa-1"}, {"ES256", jose.ES256, ec, "ec-1"}, {"EdDSA", jose.EdDSA, ed, "ed-1"}} {
		tok := sign(t, c.alg, c.key, c.kid, claims(nil))
		b.Run(c.name+"/first", func(b *testing.B) {
			for b.Loop() {
				v.mu.Lock()
				v.verified = nil
				v.mu.Unlock()
				if _, err := v.Verify(tok); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/again", func(b *testing.B) {
			for b.Loop() {
				if _, err := v.Verify(tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	toks, _ := auth.ParseEnv("static-token-0123:viewer", nil)
	b.Run("static", func(b *testing.B) {
		for b.Loop() {
			if _, ok := toks.Lookup("static-token-0123"); !ok {
				b.Fatal("static token")
			}
		}
	})
}
