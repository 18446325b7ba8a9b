package auth

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// The roles the tests declare, as a service would declare its own.
const (
	editor Role = "editor"
	admin  Role = "admin"
)

var testRoles = []Role{editor, admin}

func TestParse(t *testing.T) {
	tok, err := ParseFile(strings.NewReader("# tokens\n\neditor-secret editor\nviewer-secret viewer\n"), "t", testRoles)
	if err != nil || tok.Len() != 2 {
		t.Fatalf("%v %v", tok, err)
	}
	if r, ok := tok.Lookup("editor-secret"); !ok || r != editor {
		t.Fatal("editor token not found")
	}
	if _, ok := tok.Lookup("editor-secreT"); ok {
		t.Fatal("a wrong token was accepted")
	}
	for in, want := range map[string]string{
		"only-one-field\n":        "t:1: want \"token role\"",
		"short editor\n":          "shorter than 8",
		"long-enough-token god\n": `t:1: auth: unknown role "god" (known roles: viewer, admin, editor)`,
	} {
		if _, err := ParseFile(strings.NewReader(in), "t", testRoles); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
	env, err := ParseEnv("aaaaaaaa:editor, bbbbbbbb:viewer, cccccccc:admin", testRoles)
	if err != nil || env.Len() != 3 {
		t.Fatal(env, err)
	}
	// An admin reads and does what needs an admin, but not what needs an
	// editor.
	if r, _ := env.Lookup("cccccccc"); r != admin || !r.Has(admin) || !r.Has(Viewer) || r.Has(editor) {
		t.Errorf("admin role: %q", r)
	}
	if r, _ := env.Lookup("aaaaaaaa"); r.Has(admin) {
		t.Error("an editor has the admin role")
	}
	if r, _ := env.Lookup("bbbbbbbb"); r.Has(admin) || r.Has(editor) || !r.Has(Viewer) {
		t.Error("a viewer has more than the viewer role")
	}
	if _, err := ParseEnv("aaaaaaaa", testRoles); err == nil {
		t.Fatal("missing role accepted")
	}
	// A role the binary did not declare is refused, though another binary
	// may know it.
	if _, err := ParseEnv("aaaaaaaa:editor", []Role{admin}); err == nil || !strings.Contains(err.Error(), `unknown role "editor"`) {
		t.Fatalf("an undeclared role: %v", err)
	}
}

// The zero Tokens, and NewTokens with no roles, know only Viewer.
func TestViewerAlwaysKnown(t *testing.T) {
	for _, toks := range []*Tokens{{}, NewTokens(nil)} {
		if err := toks.Add("viewer-token-1", Viewer); err != nil {
			t.Fatal(err)
		}
		if err := toks.Add("editor-token-1", editor); err == nil {
			t.Fatal("an undeclared role was added")
		}
	}
	if got := NewTokens([]Role{admin, Viewer, editor, admin}).Roles(); len(got) != 3 || got[0] != Viewer || got[1] != admin || got[2] != editor {
		t.Fatalf("roles %q", got)
	}
}

// A role whose name cannot be written in a token file is a program's
// mistake, found when the tokens are made.
func TestMalformedRolePanics(t *testing.T) {
	for _, r := range []Role{"", "a b", "a:b", "a,b", "a\x00"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("role %q accepted", r)
				}
			}()
			NewTokens([]Role{r})
		}()
	}
}

func TestRequireRole(t *testing.T) {
	tok, _ := ParseEnv("editor-token:editor,viewer-token:viewer,admin-token:admin", testRoles)
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) })
	read, edit := tok.RequireRole(Viewer, ok), tok.RequireRole(editor, ok)
	for _, c := range []struct {
		h      http.Handler
		token  string
		status int
	}{
		{read, "", 401}, {read, "nope-nope", 401}, {read, "viewer-token", 200}, {read, "editor-token", 200}, {read, "admin-token", 200},
		{edit, "", 401}, {edit, "viewer-token", 403}, {edit, "admin-token", 403}, {edit, "editor-token", 200},
	} {
		req := httptest.NewRequest("POST", "/x", nil)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		rec := httptest.NewRecorder()
		c.h.ServeHTTP(rec, req)
		if rec.Code != c.status {
			t.Errorf("%q: %d, want %d", c.token, rec.Code, c.status)
		}
		if c.status >= 400 && rec.Header().Get("Content-Type") != "application/problem+json" {
			t.Errorf("%q: not problem+json", c.token)
		}
		if c.status == 403 && !strings.Contains(rec.Body.String(), "needs a token of role editor") {
			t.Errorf("%q: 403 does not name the role needed: %s", c.token, rec.Body)
		}
	}
}

// The scheme of an Authorization header is case-insensitive (RFC 9110).
func TestBearerSchemeCaseInsensitive(t *testing.T) {
	tokens := &Tokens{}
	if err := tokens.Add("viewer-token-1", Viewer); err != nil {
		t.Fatal(err)
	}
	h := tokens.RequireRole(Viewer, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for _, scheme := range []string{"Bearer", "bearer", "BEARER"} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("Authorization", scheme+" viewer-token-1")
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Errorf("scheme %q: %d", scheme, rec.Code)
		}
	}
}

// Tokens are accepted as the password of basic auth too (what registry
// clients send); the user name is not the token.
func TestBasicAuth(t *testing.T) {
	tok, err := ParseEnv("admin-secret:admin,viewer-secret:viewer,editor-secret:editor", testRoles)
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	h := tok.RequireRole(admin, ok)
	for _, c := range []struct {
		user, password string
		want           int
	}{
		{"x", "admin-secret", 204},
		{"", "viewer-secret", 403},
		{"", "editor-secret", 403},
		{"admin-secret", "", 401}, // the token is the password, not the user
		{"x", "wrong-secret", 401},
	} {
		req := httptest.NewRequest("POST", "/", nil)
		req.SetBasicAuth(c.user, c.password)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%q:%q: %d, want %d", c.user, c.password, rec.Code, c.want)
		}
	}
}

// TestDigestEntries: a file or LOGBOOK_TOKENS may hold a token's digest
// in place of the token; the token then authenticates, and the file holds
// nothing that does.
func TestDigestEntries(t *testing.T) {
	d := Digest("editor-secret-token")
	if !strings.HasPrefix(d, "sha256:") || len(d) != len("sha256:")+64 {
		t.Fatalf("digest %q", d)
	}
	upper := DigestPrefix + strings.ToUpper(strings.TrimPrefix(Digest("upper-case-hex-token"), DigestPrefix))
	toks, err := ParseFile(strings.NewReader(d+" editor\nplain-viewer-token viewer\n"+upper+" viewer\n"), "t", testRoles)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := toks.Lookup("editor-secret-token"); !ok || r != editor {
		t.Fatalf("the digest's token: %q %v", r, ok)
	}
	if _, ok := toks.Lookup(d); ok {
		t.Fatal("the digest itself authenticates")
	}
	if _, ok := toks.Lookup("upper-case-hex-token"); !ok {
		t.Fatal("a digest in upper-case hex")
	}
	if r, ok := toks.Lookup("plain-viewer-token"); !ok || r != Viewer {
		t.Fatal("a plain token beside a digest")
	}
	env, err := ParseEnv(d+":editor,"+Digest("admin-secret-token")+":admin", testRoles)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := env.Lookup("admin-secret-token"); !ok || r != admin {
		t.Fatalf("a digest in LOGBOOK_TOKENS: %q %v", r, ok)
	}
	for _, bad := range []string{"sha256:abc editor", "sha256:" + strings.Repeat("g", 64) + " editor", d + " god"} {
		if _, err := ParseFile(strings.NewReader(bad), "t", testRoles); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// A client certificate's role counts only if the server verified the
// certificate: the same certificate unverified (TLS that asks for no
// client certificate, or does not check it) carries no role.
func TestCertRoleNeedsAVerifiedCertificate(t *testing.T) {
	u, _ := url.Parse(CertRolePrefix + "editor")
	cert := &x509.Certificate{URIs: []*url.URL{u}}
	tokens := NewTokens([]Role{editor})
	h := tokens.RequireRole(editor, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for _, c := range []struct {
		name  string
		state *tls.ConnectionState
		want  int
	}{
		{"plaintext", nil, http.StatusUnauthorized},
		{"unverified", &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}, http.StatusUnauthorized},
		{"verified", &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}, VerifiedChains: [][]*x509.Certificate{{cert}}}, http.StatusOK},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.TLS = c.state
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("%s: %d, want %d", c.name, w.Code, c.want)
		}
	}
}
