// Package auth is token authentication with five roles: planners change
// the flight schedule, bookers book and return tickets, senders send
// notifications, viewers only
// read, and schema admins change the schema registry (register, delete,
// configure; reading schemas needs only a viewer). Tokens come from a
// file (one "token role" per line) or an environment variable
// ("token:role,…"), and are sent as a bearer token or as the password of
// HTTP basic auth (the user name is ignored), which is what Confluent's
// registry clients send.
package auth

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"unicode"

	"github.com/logbook/logbook/engine/problem"
)

// Role is what a token may do.
type Role string

const (
	Planner     Role = "planner"
	Viewer      Role = "viewer"
	SchemaAdmin Role = "schema-admin"
	// Booker may book and return tickets (and read, like every role),
	// but not change the flight schedule.
	Booker Role = "booker"
	// Sender may send notifications (and read, like every role).
	Sender Role = "sender"
)

// CanWrite reports whether the role may change the schedule.
func (r Role) CanWrite() bool { return r == Planner }

// Tokens maps tokens to roles. Tokens are kept only as SHA-256 digests,
// and looked up by digest: a timing difference then says something about a
// hash, not about the token.
type Tokens struct {
	byDigest map[[32]byte]Role
}

// Add registers a token.
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
	if role != Planner && role != Viewer && role != SchemaAdmin && role != Booker && role != Sender {
		return fmt.Errorf("auth: unknown role %q (planner, booker, sender, viewer or schema-admin)", role)
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

// ParseFile reads "token role" lines; blank lines and #-comments are skipped.
func ParseFile(r io.Reader, name string) (*Tokens, error) {
	t := &Tokens{}
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

// ParseEnv reads "token:role,token:role".
func ParseEnv(v string) (*Tokens, error) {
	t := &Tokens{}
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

// Load reads tokens from file if given, else from LOGBOOK_TOKENS.
func Load(file string) (*Tokens, error) {
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return ParseFile(f, file)
	}
	return ParseEnv(os.Getenv("LOGBOOK_TOKENS"))
}

// Has reports whether a token of role r may use a route that needs role
// need: Viewer is the least role, which every token has; any other role
// only its holders.
func (r Role) Has(need Role) bool { return need == Viewer || need == "" || r == need }

// RequireRole wraps h: no valid token, 401; a token without the
// role need (Role.Has), 403.
func (t *Tokens) RequireRole(need Role, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		role, ok := t.authenticate(w, r)
		if !ok {
			return
		}
		if !role.Has(need) {
			problem.Error(w, http.StatusForbidden, fmt.Sprintf("role %s may not do this: it needs a %s token", role, need))
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

// Require wraps h: no valid token, 401; a role other than planner on a
// method that changes things (anything but GET, HEAD, OPTIONS), 403.
func (t *Tokens) Require(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		role, ok := t.authenticate(w, r)
		if !ok {
			return
		}
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			if !role.CanWrite() {
				problem.Error(w, http.StatusForbidden, fmt.Sprintf("role %s may only read; changing the schedule needs a planner token", role))
				return
			}
		}
		h.ServeHTTP(w, r)
	})
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
