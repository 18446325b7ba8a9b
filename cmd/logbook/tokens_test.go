package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/internal/devca"
)

// startServing runs a serving command in-process until the test ends and
// returns its base URL, read from its JSON log's "… serving" line, and
// its log.
func startServing(t *testing.T, args ...string) (string, *syncBuffer) {
	t.Helper()
	var stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	args = append(args, "--addr", "127.0.0.1:0", "--log-format", "json")
	go func() {
		done <- run(ctx, &env{stdout: &syncBuffer{}, stderr: &stderr, getenv: os.Getenv}, args)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("%v exited %d: %s", args, code, stderr.String())
		}
	})
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, line := range strings.Split(stderr.String(), "\n") {
			var l struct{ Msg, URL string }
			if json.Unmarshal([]byte(line), &l) == nil && strings.HasSuffix(l.Msg, " serving") && l.URL != "" {
				return l.URL, &stderr
			}
		}
		select {
		case code := <-done:
			done <- code
			t.Fatalf("%v exited %d before serving: %s", args, code, stderr.String())
		default:
		}
	}
	t.Fatalf("no serving line:\n%s", stderr.String())
	return "", nil
}

// TestServeJWTsAndRevocableTokens: a serving command takes JSON Web Tokens
// of an identity provider beside the static tokens of its file (one of
// them stored as a digest); a refused JWT is answered 401 saying why; a
// token removed from the file stops working without a restart; the log
// shows no token.
func TestServeJWTsAndRevocableTokens(t *testing.T) {
	t.Setenv("LOGBOOK_TOKENS", "")
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	}))
	defer idp.Close()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	mint := func(aud string, exp time.Time, roles ...string) string {
		tok, err := jwt.Signed(signer).Claims(map[string]any{
			"iss": "https://idp.test", "aud": aud, "sub": "someone", "exp": exp.Unix(), "iat": time.Now().Unix(), "roles": roles,
		}).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	const writerTok, viewerTok = "static-writer-token-1f3a", "static-viewer-token-9c2e"
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte(auth.Digest(writerTok)+" writer\n"+viewerTok+" viewer\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url, logs := startServing(t, "kv", "serve", "--data", t.TempDir(), "--tokens", file,
		"--jwks-url", idp.URL, "--issuer", "https://idp.test", "--audience", "logbook-kv")

	n := 0
	put := func(token string) (int, string) {
		t.Helper()
		n++
		req, _ := http.NewRequest("PUT", fmt.Sprintf("%s/api/kv/k/%d", url, n), strings.NewReader("v"))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("If-None-Match", "*")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	hour := time.Now().Add(time.Hour)
	jwtWriter := mint("logbook-kv", hour, "writer")
	for _, c := range []struct {
		name, token string
		code        int
		says        string
	}{
		{"static token stored as a digest", writerTok, 201, ""},
		{"static viewer", viewerTok, 403, "needs a token of role writer"},
		{"JWT of a writer", jwtWriter, 201, ""},
		{"JWT of a viewer", mint("logbook-kv", hour, "viewer"), 403, "needs a token of role writer"},
		{"JWT of an unknown role", mint("logbook-kv", hour, "superuser"), 403, "no role this service knows"},
		{"expired JWT", mint("logbook-kv", time.Now().Add(-time.Hour), "writer"), 401, "token expired"},
		{"JWT for another audience", mint("logbook-flights", hour, "writer"), 401, "another audience"},
		{"the digest itself", auth.Digest(writerTok), 401, "unknown bearer token"},
	} {
		code, body := put(c.token)
		if code != c.code || !strings.Contains(body, c.says) {
			t.Errorf("%s: %d %s, want %d %q", c.name, code, body, c.code, c.says)
		}
	}

	// A JWT signed by a key the issuer does not publish: 401 as
	// problem+json naming that reason, and nothing of the token — not its
	// key id, subject or issuer — nor where the keys come from.
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	otherSigner, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: other}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "kid-not-published-5d1"))
	if err != nil {
		t.Fatal(err)
	}
	forged, err := jwt.Signed(otherSigner).Claims(map[string]any{
		"iss": "https://idp.test", "aud": "logbook-kv", "sub": "subject-marker-77", "exp": hour.Unix(), "roles": []string{"writer"},
	}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("PUT", url+"/api/kv/k/forged", strings.NewReader("v"))
	req.Header.Set("Authorization", "Bearer "+forged)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var prob struct {
		Status int
		Detail string
	}
	if res.StatusCode != 401 || res.Header.Get("Content-Type") != "application/problem+json" || json.Unmarshal(raw, &prob) != nil || prob.Status != 401 ||
		!strings.Contains(prob.Detail, "a key the issuer does not publish") {
		t.Errorf("a JWT of an unknown key: %d %s %s, want a 401 problem saying the key is not published", res.StatusCode, res.Header.Get("Content-Type"), raw)
	}
	for _, leak := range []string{"kid-not-published-5d1", "subject-marker-77", "idp.test", strings.TrimPrefix(idp.URL, "http://"), forged[:20]} {
		if strings.Contains(string(raw), leak) {
			t.Errorf("the refusal of a JWT of an unknown key shows %q: %s", leak, raw)
		}
	}

	// Revoke the writer's static token by editing the file.
	if err := os.WriteFile(file, []byte(viewerTok+" viewer\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _ := put(writerTok)
		if code == 401 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the revoked token still answers %d", code)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, _ := put(jwtWriter); code != 201 {
		t.Errorf("a JWT after the file's reload: %d", code)
	}
	if !strings.Contains(logs.String(), "tokens reloaded") {
		t.Errorf("the reload is not logged:\n%s", logs.String())
	}
	for _, secret := range []string{writerTok, viewerTok, jwtWriter} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log shows a token:\n%s", logs.String())
		}
	}
}

// TestTokenDigestCommand: logbook token digest reads the token on stdin
// and prints the digest a token file takes.
func TestTokenDigestCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), &env{stdout: &out, stderr: &errb, stdin: strings.NewReader("my-secret-token\n")}, []string{"token", "digest"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if got := strings.TrimSpace(out.String()); got != auth.Digest("my-secret-token") {
		t.Fatalf("digest %q", got)
	}
	toks, err := auth.ParseFile(strings.NewReader(out.String()[:len(out.String())-1]+" viewer\n"), "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := toks.Lookup("my-secret-token"); !ok {
		t.Fatal("the printed digest does not authenticate its token")
	}
	for _, in := range []string{"", "tiny\n", "two-tokens-aaa\nanother-bbbb\n"} {
		errb.Reset()
		if code := run(context.Background(), &env{stdout: io.Discard, stderr: &errb, stdin: strings.NewReader(in)}, []string{"token", "digest"}); code != 2 {
			t.Errorf("%q: exit %d, want 2", in, code)
		}
		if in != "" && strings.Contains(errb.String(), strings.TrimSpace(in)) {
			t.Errorf("%q: the error shows the token: %s", in, errb.String())
		}
	}
}

// TestJWTFlagsUsage: the JWT flags are checked before anything is served.
func TestJWTFlagsUsage(t *testing.T) {
	t.Setenv("LOGBOOK_TOKENS", "viewer-token-0:viewer")
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--issuer", "x"}, "give --jwks-url too"},
		{[]string{"--jwks-ca", "ca.pem"}, "give --jwks-url too"},
		{[]string{"--jwks-url", "https://idp.test/jwks", "--issuer", "i", "--audience", "a", "--jwks-ca", "/nonexistent/ca.pem"}, "--jwks-ca"},
		{[]string{"--jwks-url", "https://idp.test/jwks"}, "needs --issuer and --audience"},
		{[]string{"--jwks-url", "https://idp.test/jwks", "--issuer", "i", "--audience", "a", "--jwt-leeway", "1h"}, "--jwt-leeway"},
	} {
		var errb bytes.Buffer
		args := append([]string{"kv", "serve", "--data", t.TempDir(), "--addr", "127.0.0.1:0"}, c.args...)
		if code := run(context.Background(), &env{stdout: io.Discard, stderr: &errb, getenv: os.Getenv}, args); code != 2 || !strings.Contains(errb.String(), c.says) {
			t.Errorf("%v: exit %d %s, want 2 and %q", c.args, code, errb.String(), c.says)
		}
	}
}

// TestServeJWKSCA: --jwks-ca is the CA a serving command trusts for its
// identity provider's key set, and for that only. With it, the key set is
// fetched over HTTPS and the provider's tokens are taken; without it (the
// system's roots), or when the provider's certificate comes from another
// CA or has expired, the key set is refused and the command does not
// serve, saying why without showing the URL's query.
func TestServeJWKSCA(t *testing.T) {
	t.Setenv("LOGBOOK_TOKENS", "")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := devca.New("identity provider CA")
	if err != nil {
		t.Fatal(err)
	}
	other, err := devca.New("another CA")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	caFile, err := ca.WriteCA(dir, "idp-ca")
	if err != nil {
		t.Fatal(err)
	}
	// idp serves the key set over HTTPS with a certificate ca issues,
	// valid until notAfter.
	idp := func(ca *devca.CA, notAfter time.Time) string {
		pair, err := ca.Issue(devca.Leaf{Name: "idp", Hosts: []string{"127.0.0.1"}, NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: notAfter})
		if err != nil {
			t.Fatal(err)
		}
		cert, err := pair.TLS()
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
		}))
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
		srv.Config.ErrorLog = log.New(io.Discard, "", 0)
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv.URL + "/jwks.json?secret=query-marker-3e1"
	}
	good := idp(ca, time.Now().Add(time.Hour))
	args := func(url string, more ...string) []string {
		return append([]string{"kv", "serve", "--data", t.TempDir(), "--jwks-url", url, "--issuer", "https://idp.test", "--audience", "logbook-kv"}, more...)
	}

	url, _ := startServing(t, args(good, "--jwks-ca", caFile)...)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(signer).Claims(map[string]any{
		"iss": "https://idp.test", "aud": "logbook-kv", "sub": "someone", "exp": time.Now().Add(time.Hour).Unix(), "roles": []string{"writer"},
	}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		token string
		code  int
	}{{tok, 201}, {tok[:len(tok)-4] + "AAAA", 401}} {
		req, _ := http.NewRequest("PUT", url+"/api/kv/k/"+strconv.Itoa(c.code), strings.NewReader("v"))
		req.Header.Set("Authorization", "Bearer "+c.token)
		req.Header.Set("If-None-Match", "*")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != c.code {
			t.Errorf("a JWT, the key set fetched with --jwks-ca: %d, want %d", res.StatusCode, c.code)
		}
	}

	for _, c := range []struct {
		name string
		args []string
		says string
	}{
		{"the system's roots", args(good), "certificate signed by unknown authority"},
		{"another CA's certificate", args(idp(other, time.Now().Add(time.Hour)), "--jwks-ca", caFile), "certificate signed by unknown authority"},
		{"an expired certificate", args(idp(ca, time.Now().Add(-time.Minute)), "--jwks-ca", caFile), "expired"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var errb syncBuffer
		code := run(ctx, &env{stdout: io.Discard, stderr: &errb, getenv: os.Getenv}, append(c.args, "--addr", "127.0.0.1:0"))
		cancel()
		if code == 0 || !strings.Contains(errb.String(), c.says) || strings.Contains(errb.String(), " serving") {
			t.Errorf("%s: exit %d %s, want a refusal saying %q", c.name, code, errb.String(), c.says)
		}
		if strings.Contains(errb.String(), "query-marker-3e1") {
			t.Errorf("%s: the error shows the URL's query: %s", c.name, errb.String())
		}
	}
}
