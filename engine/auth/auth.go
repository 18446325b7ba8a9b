// Package auth is bearer-token authentication by role. A role is a name
// for what a token may do; the services declare their own (each in its
// HTTP package), and the binary that serves them gives the roles it knows
// to the token loader, which refuses any other. One role is every
// service's: Viewer, the least role, which only reads and which every
// token has (Role.Has).
//
// Tokens come from a file (one "token role" per line) or an environment
// variable ("token:role,…"), and are sent as a bearer token or as the
// password of HTTP basic auth (the user name is ignored), which is what
// Confluent's registry clients send. In place of a token, a file (or the
// variable) may hold its digest, "sha256:" and 64 hex digits (Digest):
// the file then gives away no token. Tokens.Watch reloads the file when it
// changes, or on SIGHUP, so that a token is revoked without a restart; a
// reload that fails keeps the tokens the server had.
//
// Besides static tokens, a Tokens may hold a Verifier (SetVerifier), which
// the tokens no static entry knows and which look like a JSON Web Token
// (three dot-separated parts) are given to: package engine/auth/jwks
// verifies them against an identity provider's published keys. A refused
// token is answered 401 with the reason (a Refusal), never with the
// token's contents.
package auth

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"

	"github.com/logbook/logbook/engine/problem"
)

// Role is what a token may do: a name a service declares, such as
// "viewer". A role name is not empty and has no blank, comma, colon or
// control character, so that it fits the token file and LOGBOOK_TOKENS.
type Role string

// Viewer is the least role: it reads, and every token has it.
const Viewer Role = "viewer"

// Admin is the operator's role: on top of reading, it runs or changes the
// store itself — a backup, deleting and truncating streams, forgetting
// data subjects — through the admin API every service mounts. Every
// binary's token loader accepts it. It does not include the services'
// own roles.
const Admin Role = "admin"

// Has reports whether a token of role r may use a route that needs role
// need: Viewer (or no role) every token may; any other role only its
// holders.
func (r Role) Has(need Role) bool { return need == Viewer || need == "" || r == need }

// check reports why r cannot be a role name, if it cannot.
func (r Role) check() error {
	if r == "" {
		return fmt.Errorf("auth: a role has a name")
	}
	if strings.ContainsFunc(string(r), func(c rune) bool {
		return unicode.IsSpace(c) || unicode.IsControl(c) || c == ',' || c == ':'
	}) {
		return fmt.Errorf("auth: role %q contains a blank, a control character, a comma or a colon", r)
	}
	return nil
}

// Tokens maps tokens to roles. Tokens are kept only as SHA-256 digests,
// and looked up by digest: a timing difference then says something about a
// hash, not about the token.
//
// A Tokens knows the roles it may hand out: Viewer and those given to
// NewTokens. The zero value knows only Viewer. Its set of tokens may be
// replaced while it serves (Replace, Watch): lookups see the old set or
// the new, whole.
type Tokens struct {
	byDigest atomic.Pointer[map[[32]byte]Role]
	mu       sync.Mutex // serializes writers: Add and Replace
	roles    []Role     // the roles Add accepts besides Viewer, sorted
	verifier Verifier   // tokens no entry knows, if set
}

// Verifier authenticates the tokens a Tokens does not hold itself, such
// as JSON Web Tokens signed by an identity provider.
type Verifier interface {
	// Verify returns the role names a token it accepts carries, or why
	// it refused the token: a *Refusal, whose reason the client is told.
	// Any other error is answered as an invalid token, without details.
	Verify(token string) ([]string, error)
}

// Refusal is why a token was refused, in words fit to tell the client:
// they name the check that failed, never a key or a claim's value.
type Refusal struct {
	Status int // 401, or 403 for a valid token without a usable role
	Reason string
}

func (r *Refusal) Error() string { return r.Reason }

// SetVerifier gives the tokens no static entry knows, and that look like a
// JSON Web Token, to v. Call it before the tokens are used.
func (t *Tokens) SetVerifier(v Verifier) { t.verifier = v }

// HasVerifier reports whether SetVerifier was given one.
func (t *Tokens) HasVerifier() bool { return t.verifier != nil }

// Digest returns the form a token file may hold in place of token:
// "sha256:" and the hex SHA-256 digest of the token.
func Digest(token string) string {
	d := sha256.Sum256([]byte(token))
	return DigestPrefix + hex.EncodeToString(d[:])
}

// DigestPrefix starts a token's digest in a token file.
const DigestPrefix = "sha256:"

// parseDigest returns the digest an entry of the form "sha256:<64 hex>"
// holds; ok is false for any other entry, which is a token.
func parseDigest(entry string) (d [32]byte, ok bool, err error) {
	h, found := strings.CutPrefix(entry, DigestPrefix)
	if !found {
		return d, false, nil
	}
	if len(h) != 64 {
		return d, true, fmt.Errorf("auth: a digest is %s and 64 hex digits, got %d characters after the prefix", DigestPrefix, len(h))
	}
	if _, err := hex.Decode(d[:], []byte(strings.ToLower(h))); err != nil {
		return d, true, fmt.Errorf("auth: a digest is %s and 64 hex digits: %w", DigestPrefix, err)
	}
	return d, true, nil
}

// NewTokens returns an empty set of tokens whose roles may be Viewer or
// one of roles: the roles the services a binary serves declare. It panics
// on a malformed role name, which is a program's mistake, not a user's.
func NewTokens(roles []Role) *Tokens {
	t := &Tokens{}
	for _, r := range roles {
		if err := r.check(); err != nil {
			panic(err)
		}
		if r != Viewer && !slices.Contains(t.roles, r) {
			t.roles = append(t.roles, r)
		}
	}
	slices.Sort(t.roles)
	return t
}

// Roles returns the roles a token may have: Viewer first, then the
// others in order of name.
func (t *Tokens) Roles() []Role { return append([]Role{Viewer}, t.roles...) }

// Add registers a token of a known role.
func (t *Tokens) Add(token string, role Role) error {
	if len(token) < 8 {
		// The errors name no part of the token: they are logged when a
		// token file is reloaded.
		return errors.New("auth: a token is shorter than 8 characters")
	}
	// A token travels in one Authorization header, which drops the
	// blanks around it and cannot carry control characters: a token with
	// either would be kept but could never authenticate.
	if strings.ContainsFunc(token, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return errors.New("auth: a token contains a blank or a control character")
	}
	if err := t.knows(role); err != nil {
		return err
	}
	t.put(sha256.Sum256([]byte(token)), role)
	return nil
}

// AddEntry registers an entry of a token file: a token, or a token's
// digest ("sha256:" and 64 hex digits, see Digest).
func (t *Tokens) AddEntry(entry string, role Role) error {
	d, isDigest, err := parseDigest(entry)
	if !isDigest {
		return t.Add(entry, role)
	}
	if err != nil {
		return err
	}
	if err := t.knows(role); err != nil {
		return err
	}
	t.put(d, role)
	return nil
}

// knows returns an error if role is not one t may hand out.
func (t *Tokens) knows(role Role) error {
	if role != Viewer && !slices.Contains(t.roles, role) {
		names := make([]string, 0, len(t.roles)+1)
		for _, r := range t.Roles() {
			names = append(names, string(r))
		}
		return fmt.Errorf("auth: unknown role %q (known roles: %s)", role, strings.Join(names, ", "))
	}
	return nil
}

// put adds one digest, copying the map: readers never see it change.
func (t *Tokens) put(d [32]byte, role Role) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.byDigest.Load()
	m := make(map[[32]byte]Role, 1)
	if old != nil {
		m = make(map[[32]byte]Role, len(*old)+1)
		for k, v := range *old {
			m[k] = v
		}
	}
	m[d] = role
	t.byDigest.Store(&m)
}

// Replace makes t's tokens those of from, at once: a request sees the
// old set or the new one. The roles t knows and its verifier stay.
func (t *Tokens) Replace(from *Tokens) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := from.byDigest.Load()
	if m == nil {
		m = &map[[32]byte]Role{}
	}
	t.byDigest.Store(m)
}

// Len is the number of tokens.
func (t *Tokens) Len() int {
	if m := t.byDigest.Load(); m != nil {
		return len(*m)
	}
	return 0
}

// Lookup returns the role of token. A token the verifier accepts
// (SetVerifier) with several known roles has the first of them that is
// not Viewer; RequireRole, though, lets it do what any of them may.
func (t *Tokens) Lookup(token string) (Role, bool) {
	roles, err := t.Check(token)
	if err != nil {
		return "", false
	}
	for _, r := range roles {
		if r != Viewer {
			return r, true
		}
	}
	return roles[0], true
}

// Check returns the roles of token, or why it is refused: a *Refusal.
// A token of the static set has one role; the tokens it does not hold,
// and that look like a JSON Web Token, are given to the verifier, and
// have the roles the verifier finds that t knows.
func (t *Tokens) Check(token string) ([]Role, error) {
	if m := t.byDigest.Load(); m != nil {
		if r, ok := (*m)[sha256.Sum256([]byte(token))]; ok {
			return []Role{r}, nil
		}
	}
	if t.verifier == nil || strings.Count(token, ".") != 2 {
		return nil, &Refusal{Status: http.StatusUnauthorized, Reason: "unknown bearer token"}
	}
	names, err := t.verifier.Verify(token)
	if err != nil {
		var ref *Refusal
		if errors.As(err, &ref) {
			return nil, ref
		}
		return nil, &Refusal{Status: http.StatusUnauthorized, Reason: "invalid bearer token"}
	}
	var roles []Role
	for _, n := range names {
		r := Role(n)
		if (r == Viewer || slices.Contains(t.roles, r)) && !slices.Contains(roles, r) {
			roles = append(roles, r)
		}
	}
	if len(roles) == 0 {
		return nil, &Refusal{Status: http.StatusForbidden, Reason: "the token names no role this service knows"}
	}
	return roles, nil
}

// ParseFile reads "token role" lines; blank lines and #-comments are
// skipped. A token may be given as its digest, "sha256:" and 64 hex
// digits (Digest). A role must be Viewer or one of roles (see NewTokens).
func ParseFile(r io.Reader, name string, roles []Role) (*Tokens, error) {
	t := NewTokens(roles)
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("%s:%d: want \"token role\", got %d fields", name, n, len(f))
		}
		if err := t.AddEntry(f[0], Role(f[1])); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
	}
	return t, sc.Err()
}

// ParseEnv reads "token:role,token:role"; a token may be given as its
// digest, "sha256:<hex>:role". A role must be Viewer or one
// of roles (see NewTokens).
func ParseEnv(v string, roles []Role) (*Tokens, error) {
	t := NewTokens(roles)
	for i, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		tok, role, ok := strings.Cut(item, ":")
		if tok+":" == DigestPrefix {
			j := strings.LastIndexByte(item, ':')
			tok, role = item[:j], item[j+1:]
		}
		if !ok {
			return nil, fmt.Errorf("LOGBOOK_TOKENS item %d: want token:role", i+1)
		}
		if err := t.AddEntry(tok, Role(role)); err != nil {
			return nil, fmt.Errorf("LOGBOOK_TOKENS item %d: %w", i+1, err)
		}
	}
	return t, nil
}

// Load reads tokens from file if given, else from LOGBOOK_TOKENS. A role
// must be Viewer or one of roles: the binary passes the roles its services
// declare, so that a misspelt role is refused when the server starts.
func Load(file string, roles []Role) (*Tokens, error) {
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return ParseFile(f, file, roles)
	}
	return ParseEnv(os.Getenv("LOGBOOK_TOKENS"), roles)
}

// RequireRole wraps h: no valid token, 401; a token without the
// role need (Role.Has), 403.
func (t *Tokens) RequireRole(need Role, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		roles, ok := t.authenticate(w, r)
		if !ok {
			return
		}
		if !slices.ContainsFunc(roles, func(r Role) bool { return r.Has(need) }) {
			problem.Error(w, http.StatusForbidden, fmt.Sprintf("role %s may not do this: it needs a token of role %s", roleNames(roles), need))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// FromRequest returns the token a request carries: a bearer token, or the
// password of HTTP basic auth.
func FromRequest(r *http.Request) (string, bool) {
	if tok, ok := BearerToken(r); ok {
		return tok, true
	}
	if _, pass, ok := r.BasicAuth(); ok && pass != "" {
		return pass, true
	}
	return "", false
}

func roleNames(roles []Role) string {
	s := make([]string, len(roles))
	for i, r := range roles {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

// authenticate finds the roles of the request's token, or answers 401
// (403 for a valid token with no role the service knows) saying why. A
// request without a token may instead carry its role in a verified
// client certificate (CertRole), if the role is one these tokens know.
func (t *Tokens) authenticate(w http.ResponseWriter, r *http.Request) ([]Role, bool) {
	tok, ok := FromRequest(r)
	if !ok {
		if role, ok := CertRole(r); ok && (role == Viewer || slices.Contains(t.roles, role)) {
			return []Role{role}, true
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="logbook"`)
		problem.Error(w, http.StatusUnauthorized, "a bearer token is required (Authorization: Bearer TOKEN)")
		return nil, false
	}
	roles, err := t.Check(tok)
	if err != nil {
		ref := err.(*Refusal)
		if ref.Status == http.StatusForbidden {
			w.Header().Set("WWW-Authenticate", `Bearer realm="logbook", error="insufficient_scope"`)
		} else {
			w.Header().Set("WWW-Authenticate", `Bearer realm="logbook", error="invalid_token"`)
		}
		problem.Error(w, ref.Status, ref.Reason)
		return nil, false
	}
	return roles, true
}

// bearer returns the token of an Authorization header of the Bearer
// scheme, whose name is case-insensitive (RFC 9110 §11.1).
func bearer(authz string) (string, bool) {
	scheme, tok, ok := strings.Cut(authz, " ")
	tok = strings.TrimSpace(tok)
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return "", false
	}
	return tok, true
}

// BearerToken returns the request's bearer token, if it has one.
func BearerToken(r *http.Request) (string, bool) { return bearer(r.Header.Get("Authorization")) }

// CertRolePrefix begins the URI subject alternative name by which a
// client certificate carries a role: "logbook-role:ROLE".
const CertRolePrefix = "logbook-role:"

// CertRole returns the role carried by the request's client certificate,
// if the server verified that certificate against its client CA (mutual
// TLS; the certificate chains to the CA, so whoever holds the CA's key
// hands out roles, as etcd's client-certificate authentication does). The
// role is the first URI subject alternative name "logbook-role:ROLE" of
// the client's own certificate. A certificate that was not verified —
// plain HTTP, TLS without client certificates — carries no role.
func CertRole(r *http.Request) (Role, bool) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.PeerCertificates) == 0 {
		return "", false
	}
	for _, u := range r.TLS.PeerCertificates[0].URIs {
		if u.Scheme+":" == CertRolePrefix && u.Opaque != "" {
			role := Role(u.Opaque)
			if role.check() != nil {
				return "", false
			}
			return role, true
		}
	}
	return "", false
}
