// Package httpkit holds the building blocks of a service's HTTP API: the route
// table (each route's method, path, least role and kind), which the
// handler, the node's gating (read replicas, commands-only write nodes),
// the cluster's proxy routing and the OpenAPI check all read; handlers
// that return errors, answered as problem+json with a type URI per kind of
// failure; strict JSON bodies; and the command options every write takes
// (Idempotency-Key, If-Match).
package httpkit

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/logbook/logbook/engine/auth"
)

// Kind says which nodes serve a route.
type Kind int

const (
	// Command changes the write model: served by write nodes.
	Command Kind = iota + 1
	// AggregateRead reads an aggregate's state from the write model:
	// served by write nodes.
	AggregateRead
	// ViewQuery reads a read model: served by nodes that keep it (read
	// replicas and full nodes); a commands-only write node answers 421.
	ViewQuery
	// Anywhere is about the node or the API itself (who am I, the
	// OpenAPI document): every node serves it.
	Anywhere
)

func (k Kind) String() string {
	switch k {
	case Command:
		return "command"
	case AggregateRead:
		return "aggregate read"
	case ViewQuery:
		return "view query"
	case Anywhere:
		return "anywhere"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Spec is what a route is, apart from its handler.
type Spec struct {
	Method string // GET, POST, …
	Path   string // an http.ServeMux path: /api/rotations/{id}/legs
	// Role is the least role a bearer token needs: auth.Viewer admits any
	// known token, a role the service declares only its holders. Public
	// routes need none.
	Role   auth.Role
	Public bool
	Kind   Kind
	// Pinned routes keep state in one node's memory (an upload and its
	// status polls): a proxy sends all of them to the same node.
	Pinned bool
	// Query names the query parameters the route takes (view queries
	// usually MinPosition among them). Any other is refused with 400, so
	// that a parameter nobody reads cannot make each request a new cache
	// entry, and a misspelt one is not silently ignored.
	Query []string
}

// MinPosition is the query parameter of read-your-writes: a view query
// waits until its read model has applied that log position.
const MinPosition = "min_position"

// checkQuery refuses query parameters the route does not take.
func (s Spec) checkQuery(r *http.Request) error {
	if r.URL.RawQuery == "" {
		return nil
	}
	for name := range r.URL.Query() {
		if slices.Contains(s.Query, name) {
			continue
		}
		if len(s.Query) == 0 {
			return BadRequest("unknown query parameter %q: %s takes none", name, s.Pattern())
		}
		return BadRequest("unknown query parameter %q: %s takes %s", name, s.Pattern(), strings.Join(s.Query, ", "))
	}
	return nil
}

// Pattern is the route's http.ServeMux pattern.
func (s Spec) Pattern() string { return s.Method + " " + s.Path }

// Wildcards are the names of the path's {wildcards}, in order.
func (s Spec) Wildcards() []string {
	var names []string
	for _, m := range wildcard.FindAllStringSubmatch(s.Path, -1) {
		names = append(names, strings.TrimSuffix(m[1], "..."))
	}
	return names
}

var wildcard = regexp.MustCompile(`\{([^}]+)\}`)

// PathRegexp is a regular expression (PCRE and Go syntax) matching the
// request paths of the route; with capture set, the first wildcard is a
// named group of that name.
func (s Spec) PathRegexp(capture string) string {
	var b strings.Builder
	b.WriteString("^")
	rest := s.Path
	first := true
	for {
		loc := wildcard.FindStringSubmatchIndex(rest)
		if loc == nil {
			b.WriteString(regexp.QuoteMeta(rest))
			break
		}
		b.WriteString(regexp.QuoteMeta(rest[:loc[0]]))
		name := rest[loc[2]:loc[3]]
		seg := "[^/]+"
		if strings.HasSuffix(name, "...") {
			seg = ".*"
		}
		if first && capture != "" {
			seg = "(?<" + capture + ">" + seg + ")"
		}
		first = false
		b.WriteString(seg)
		rest = rest[loc[1]:]
	}
	if !strings.HasSuffix(s.Path, "/") {
		b.WriteString("$")
	}
	return b.String()
}

// Route is a Spec and its handler, a method of the service's API type T.
type Route[T any] struct {
	Spec
	Handle func(T, http.ResponseWriter, *http.Request) error
}

// NewRoute is the route for pattern ("METHOD /path") that tokens of role
// may call, served where kind says, handled by h.
func NewRoute[T any](pattern string, role auth.Role, kind Kind, h func(T, http.ResponseWriter, *http.Request) error) Route[T] {
	method, path, _ := strings.Cut(pattern, " ")
	return Route[T]{Spec: Spec{Method: method, Path: path, Role: role, Kind: kind}, Handle: h}
}

// WithQuery returns r taking the query parameters params; its handler
// refuses any other.
func (r Route[T]) WithQuery(params ...string) Route[T] {
	r.Query = params
	return r
}

// Specs returns the routes' specs.
func Specs[T any](routes []Route[T]) []Spec {
	out := make([]Spec, len(routes))
	for i, r := range routes {
		out[i] = r.Spec
	}
	return out
}

// Node says what a node keeps, and so which kinds of route it serves.
type Node struct {
	WriteModel bool // the aggregate runtimes: commands and aggregate reads
	Views      bool // the read models: view queries
}

// Serves reports whether the node serves routes of kind k, and if not
// the reason a client is told (with 421 Misdirected Request).
func (n Node) Serves(k Kind) (bool, string) {
	switch k {
	case Command, AggregateRead:
		if !n.WriteModel {
			return false, "this is a read replica: it answers view queries; send commands and aggregate reads to a write node"
		}
	case ViewQuery:
		if !n.Views {
			return false, "this write node keeps no read model (commands only): send view queries to a read replica"
		}
	}
	return true, ""
}

// Mount registers every route on mux for the API value a: a route the
// node does not serve answers 421; a route that needs a role checks the
// bearer token first (401 without a known one, 403 without the role);
// errors the handler returns are written by WriteError with the service's
// own mapping.
func Mount[T any](mux *http.ServeMux, routes []Route[T], a T, node Node, tokens *auth.Tokens, domain DomainErrors) {
	for _, rt := range routes {
		var h http.Handler
		if ok, why := node.Serves(rt.Kind); !ok {
			h = Handler(func(http.ResponseWriter, *http.Request) error {
				return &Error{Status: http.StatusMisdirectedRequest, Type: TypeMisdirected, Detail: why}
			}, domain)
		} else {
			spec, handle := rt.Spec, rt.Handle
			h = Handler(func(w http.ResponseWriter, r *http.Request) error {
				if err := spec.checkQuery(r); err != nil {
					return err
				}
				return handle(a, w, r)
			}, domain)
		}
		if !rt.Public {
			h = tokens.RequireRole(rt.Role, h)
		}
		mux.Handle(rt.Pattern(), h)
	}
}
