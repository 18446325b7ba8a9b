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
// Confluent's registry clients send.
package auth

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"unicode"

	"github.com/logbook/logbook/engine/problem"
)

// Role is what a token may do: a name a service declares, such as
// "viewer". A role name is not empty and has no blank, comma, colon or
// control character, so that it fits the token file and LOGBOOK_TOKENS.
type Role string

// Viewer is the least role: it reads, and every token has it.
const Viewer Role = "viewer"

// Admin is the operator's role: it deletes and forgets what the
// services keep (it does not include the services' own roles).
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
// NewTokens. The zero value knows only Viewer.
type Tokens struct {
	byDigest map[[32]byte]Role
	roles    []Role // the roles Add accepts besides Viewer, sorted
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
		return fmt.Errorf("auth: token %q… is shorter than 8 characters", prefix(token))
	}
	// A token travels in one Authorization header, which drops the
	// blanks around it and cannot carry control characters: a token with
	// either would be kept but could never authenticate.
	if strings.ContainsFunc(token, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return fmt.Errorf("auth: token %q… contains a blank or a control character", prefix(token))
	}
	if role != Viewer && !slices.Contains(t.roles, role) {
		names := make([]string, 0, len(t.roles)+1)
		for _, r := range t.Roles() {
			names = append(names, string(r))
		}
		return fmt.Errorf("auth: unknown role %q (known roles: %s)", role, strings.Join(names, ", "))
	}
	if t.byDigest == nil {
		t.byDigest = map[[32]byte]Role{}
	}
	t.byDigest[sha256.Sum256([]byte(token))] = role
	return nil
}

// Len is the number of tokens.
func (t *Tokens) Len() int { return len(t.byDigest) }

func prefix(s string) string {
	if len(s) > 3 {
		return s[:3]
	}
	return s
}

// Lookup returns the role of token.
func (t *Tokens) Lookup(token string) (Role, bool) {
	r, ok := t.byDigest[sha256.Sum256([]byte(token))]
	return r, ok
}

// ParseFile reads "token role" lines; blank lines and #-comments are
// skipped. A role must be Viewer or one of roles (see NewTokens).
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
		if err := t.Add(f[0], Role(f[1])); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
	}
	return t, sc.Err()
}

// ParseEnv reads "token:role,token:role". A role must be Viewer or one
// of roles (see NewTokens).
func ParseEnv(v string, roles []Role) (*Tokens, error) {
	t := NewTokens(roles)
	for i, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		tok, role, ok := strings.Cut(item, ":")
		if !ok {
			return nil, fmt.Errorf("LOGBOOK_TOKENS item %d: want token:role", i+1)
		}
		if err := t.Add(tok, Role(role)); err != nil {
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
		role, ok := t.authenticate(w, r)
		if !ok {
			return
		}
		if !role.Has(need) {
			problem.Error(w, http.StatusForbidden, fmt.Sprintf("role %s may not do this: it needs a token of role %s", role, need))
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

// authenticate finds the role of the request's token, or answers 401.
func (t *Tokens) authenticate(w http.ResponseWriter, r *http.Request) (Role, bool) {
	tok, ok := FromRequest(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="logbook"`)
		problem.Error(w, http.StatusUnauthorized, "a bearer token is required (Authorization: Bearer TOKEN)")
		return "", false
	}
	role, ok := t.Lookup(tok)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="logbook", error="invalid_token"`)
		problem.Error(w, http.StatusUnauthorized, "unknown bearer token")
		return "", false
	}
	return role, true
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
