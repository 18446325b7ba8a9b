package registry

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/logbook/logbook/engine/auth"
)

// SchemaAdmin is the registry's role: a schema admin's token registers
// and deletes schemas and changes the compatibility level and the mode.
// Any token reads.
const SchemaAdmin auth.Role = "schema-admin"

// Roles returns the roles the registry declares, for the token loader of
// a binary that serves it.
func Roles() []auth.Role { return []auth.Role{SchemaAdmin} }

// ContentType is the media type of every answer, Confluent's.
const ContentType = "application/vnd.schemaregistry.v1+json"

// Handler serves Confluent Schema Registry's REST API for reg. It is meant
// to be mounted under a prefix with http.StripPrefix (logbook flights
// serve uses /registry), so that a client configured with http://HOST:PORT/registry
// finds …/registry/subjects and the rest.
//
// Every request needs a token of tokens (bearer, or the password of basic
// auth): any role reads; registering, deleting and changing the level or
// mode needs the schema-admin role.
func Handler(reg *Registry, tokens *auth.Tokens) http.Handler {
	h := &handler{reg: reg, tokens: tokens}
	mux := http.NewServeMux()
	paths := map[string]bool{}
	read := func(pattern string, fn func(*http.Request) (any, error)) {
		mux.Handle(pattern, h.serve(false, fn))
		_, path, _ := strings.Cut(pattern, " ")
		paths[path] = true
	}
	write := func(pattern string, fn func(*http.Request) (any, error)) {
		mux.Handle(pattern, h.serve(true, fn))
		_, path, _ := strings.Cut(pattern, " ")
		paths[path] = true
	}
	read("GET /{$}", func(*http.Request) (any, error) { return struct{}{}, nil })
	read("GET /schemas/types", func(*http.Request) (any, error) { return []string{"AVRO"}, nil })
	read("GET /schemas/ids/{id}", h.schemaByID)
	read("GET /schemas/ids/{id}/schema", h.schemaTextByID)
	read("GET /schemas/ids/{id}/subjects", h.subjectsByID)
	read("GET /schemas/ids/{id}/versions", h.versionsByID)
	read("GET /subjects", h.subjects)
	read("POST /subjects/{subject}", h.lookup)
	write("DELETE /subjects/{subject}", h.deleteSubject)
	read("GET /subjects/{subject}/versions", h.versions)
	write("POST /subjects/{subject}/versions", h.register)
	read("GET /subjects/{subject}/versions/{version}", h.version)
	read("GET /subjects/{subject}/versions/{version}/schema", h.versionText)
	write("DELETE /subjects/{subject}/versions/{version}", h.deleteVersion)
	read("POST /compatibility/subjects/{subject}/versions/{version}", h.check)
	read("POST /compatibility/subjects/{subject}/versions", h.check)
	read("GET /config", h.getConfig)
	write("PUT /config", h.putConfig)
	write("DELETE /config", h.deleteConfig)
	read("GET /config/{subject}", h.getConfig)
	write("PUT /config/{subject}", h.putConfig)
	write("DELETE /config/{subject}", h.deleteConfig)
	read("GET /mode", func(*http.Request) (any, error) { return modeBody{Mode: reg.Mode()}, nil })
	write("PUT /mode", h.putMode)
	// Any other method on a known path: 405, in Confluent's error shape
	// (ServeMux's own answer would be text).
	for path := range paths {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			send(w, nil, errorf(http.StatusMethodNotAllowed, http.StatusMethodNotAllowed, "HTTP 405 Method Not Allowed"))
		})
	}
	mux.Handle("/", h.serve(false, func(r *http.Request) (any, error) {
		return nil, errorf(http.StatusNotFound, http.StatusNotFound, "HTTP 404 Not Found")
	}))
	return mux
}

type handler struct {
	reg    *Registry
	tokens *auth.Tokens
}

// raw is an answer sent as it is: a schema's text, or JSON encoded before.
type raw []byte

func (h *handler) serve(write bool, fn func(*http.Request) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h.authorize(w, r, write); err != nil {
			send(w, nil, err)
			return
		}
		if err := jsonBody(r); err != nil {
			send(w, nil, err)
			return
		}
		v, err := fn(r)
		send(w, v, err)
	})
}

func (h *handler) authorize(w http.ResponseWriter, r *http.Request, write bool) error {
	tok, ok := auth.FromRequest(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Basic realm="logbook registry"`)
		return errorf(http.StatusUnauthorized, http.StatusUnauthorized, "Unauthorized: a token is required, as a bearer token or as the password of basic auth")
	}
	role, ok := h.tokens.Lookup(tok)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Basic realm="logbook registry"`)
		return errorf(http.StatusUnauthorized, http.StatusUnauthorized, "Unauthorized: unknown token")
	}
	if write && !role.Has(SchemaAdmin) {
		return errorf(http.StatusForbidden, http.StatusForbidden, "Forbidden: role %s may only read; changing the registry needs a %s token", role, SchemaAdmin)
	}
	return nil
}

// bodyTypes are the content types a POST or PUT may declare: those
// Confluent's registry takes. None is one a browser sends cross-site
// without a CORS preflight (form encodings, text/plain, or no type at
// all), so a page elsewhere cannot make a browser that holds a basic-auth
// password for the registry register, delete or reconfigure through it.
var bodyTypes = map[string]bool{
	ContentType:                           true,
	"application/vnd.schemaregistry+json": true,
	"application/json":                    true,
	"application/octet-stream":            true,
}

// jsonBody refuses a POST or PUT whose declared content type is not one
// of bodyTypes: 415.
func jsonBody(r *http.Request) error {
	if r.Method != http.MethodPost && r.Method != http.MethodPut {
		return nil
	}
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || !bodyTypes[mt] {
		return errorf(http.StatusUnsupportedMediaType, http.StatusUnsupportedMediaType, "HTTP 415 Unsupported Media Type: Content-Type %q; send %s (or application/json)", ct, ContentType)
	}
	return nil
}

func send(w http.ResponseWriter, v any, err error) {
	w.Header().Set("Content-Type", ContentType)
	if err != nil {
		var re *Error
		if !errors.As(err, &re) {
			re = storeError(err).(*Error)
		}
		w.WriteHeader(re.Status)
		_ = json.NewEncoder(w).Encode(struct {
			Code    int    `json:"error_code"`
			Message string `json:"message"`
		}{re.Code, re.Message})
		return
	}
	if b, ok := v.(raw); ok {
		// A known length keeps the answer in one piece: without it,
		// net/http sends anything above its 2 KiB buffer chunked, which
		// costs both sides a parse per chunk.
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		_, _ = w.Write(b)
		return
	}
	_ = json.NewEncoder(w).Encode(v)
}

func flag(r *http.Request, name string) bool {
	b, _ := strconv.ParseBool(r.URL.Query().Get(name))
	return b
}

func parseVersion(s string) (int, error) {
	if s == "latest" {
		return Latest, nil
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err == nil && (n >= 1 || n == Latest) {
		return int(n), nil
	}
	return 0, errorf(http.StatusUnprocessableEntity, codeInvalidVersion, "The specified version '%s' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\"", s)
}

func parseID(s string) (int, error) {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 1 {
		return 0, errSchemaNotFound()
	}
	return int(n), nil
}

// schemaRequest is the body of a registration, lookup or check.
type schemaRequest struct {
	Schema     string            `json:"schema"`
	SchemaType string            `json:"schemaType"`
	References []json.RawMessage `json:"references"`
	ID         int               `json:"id"`
	Version    int               `json:"version"`
}

// decode reads a JSON body of at most limit bytes into v.
func decode(r *http.Request, limit int64, v any) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return errorf(http.StatusBadRequest, http.StatusBadRequest, "reading the request: %v", err)
	}
	if int64(len(body)) > limit {
		return errorf(http.StatusRequestEntityTooLarge, http.StatusRequestEntityTooLarge, "Request body larger than %d bytes", limit)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return errorf(http.StatusUnprocessableEntity, http.StatusUnprocessableEntity, "Unprocessable entity: %v", err)
	}
	return nil
}

// smallBody bounds the bodies that carry no schema.
const smallBody = 4 << 10

func (h *handler) schemaBody(r *http.Request) (schemaRequest, error) {
	var req schemaRequest
	// A schema's JSON string escapes its quotes: allow for that.
	if err := decode(r, 2*int64(h.reg.opts.MaxSchemaBytes)+smallBody, &req); err != nil {
		return req, err
	}
	switch {
	case req.Schema == "":
		return req, errInvalidSchema("empty schema")
	case req.SchemaType != "" && req.SchemaType != "AVRO":
		return req, errInvalidSchema("schema type %s is not supported; this registry holds AVRO schemas", req.SchemaType)
	case len(req.References) > 0:
		return req, errInvalidSchema("schema references are not supported")
	}
	return req, nil
}

func (h *handler) register(r *http.Request) (any, error) {
	req, err := h.schemaBody(r)
	if err != nil {
		return nil, err
	}
	if req.ID > 0 || req.Version > 0 {
		return nil, errorf(http.StatusUnprocessableEntity, codeNotPermitted, "Operation not permitted: registering with a given id or version needs IMPORT mode, which this registry does not support")
	}
	id, err := h.reg.Register(r.Context(), r.PathValue("subject"), req.Schema)
	return map[string]int{"id": id}, err
}

func (h *handler) lookup(r *http.Request) (any, error) {
	req, err := h.schemaBody(r)
	if err != nil {
		return nil, err
	}
	return h.reg.Lookup(r.Context(), r.PathValue("subject"), req.Schema, flag(r, "deleted"))
}

func (h *handler) check(r *http.Request) (any, error) {
	num := 0 // every version the level checks
	if s := r.PathValue("version"); s != "" {
		var err error
		if num, err = parseVersion(s); err != nil {
			return nil, err
		}
	}
	req, err := h.schemaBody(r)
	if err != nil {
		return nil, err
	}
	msgs, err := h.reg.Check(r.Context(), r.PathValue("subject"), num, req.Schema)
	if err != nil {
		return nil, err
	}
	out := struct {
		Compatible bool     `json:"is_compatible"`
		Messages   []string `json:"messages,omitempty"`
	}{Compatible: len(msgs) == 0}
	if flag(r, "verbose") {
		out.Messages = msgs
	}
	return out, nil
}

func (h *handler) schemaByID(r *http.Request) (any, error) {
	id, err := parseID(r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	answer, err := h.reg.schemaAnswer(r.Context(), id)
	return raw(answer), err
}

func (h *handler) schemaTextByID(r *http.Request) (any, error) {
	id, err := parseID(r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	text, err := h.reg.SchemaByID(r.Context(), id)
	return raw(text), err
}

func (h *handler) subjectsByID(r *http.Request) (any, error) {
	svs, err := h.versionsOfID(r)
	out := []string{}
	for _, sv := range svs {
		if len(out) == 0 || out[len(out)-1] != sv.Subject {
			out = append(out, sv.Subject)
		}
	}
	return out, err
}

func (h *handler) versionsByID(r *http.Request) (any, error) {
	return h.versionsOfID(r)
}

func (h *handler) versionsOfID(r *http.Request) ([]subjectVersion, error) {
	id, err := parseID(r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	svs, err := h.reg.VersionsOfID(r.Context(), id, flag(r, "deleted"))
	if svs == nil {
		svs = []subjectVersion{}
	}
	return svs, err
}

func (h *handler) subjects(r *http.Request) (any, error) {
	return h.reg.Subjects(r.Context(), flag(r, "deleted"), r.URL.Query().Get("subjectPrefix")), nil
}

func (h *handler) versions(r *http.Request) (any, error) {
	return h.reg.Versions(r.Context(), r.PathValue("subject"), flag(r, "deleted"))
}

func (h *handler) version(r *http.Request) (any, error) {
	num, err := parseVersion(r.PathValue("version"))
	if err != nil {
		return nil, err
	}
	return h.reg.Version(r.Context(), r.PathValue("subject"), num, flag(r, "deleted"))
}

func (h *handler) versionText(r *http.Request) (any, error) {
	num, err := parseVersion(r.PathValue("version"))
	if err != nil {
		return nil, err
	}
	ss, err := h.reg.Version(r.Context(), r.PathValue("subject"), num, flag(r, "deleted"))
	return raw(ss.Schema), err
}

func (h *handler) deleteSubject(r *http.Request) (any, error) {
	return h.reg.DeleteSubject(r.Context(), r.PathValue("subject"), flag(r, "permanent"))
}

func (h *handler) deleteVersion(r *http.Request) (any, error) {
	num, err := parseVersion(r.PathValue("version"))
	if err != nil {
		return nil, err
	}
	return h.reg.DeleteVersion(r.Context(), r.PathValue("subject"), num, flag(r, "permanent"))
}

type levelBody struct {
	Level Level `json:"compatibilityLevel"`
}

func (h *handler) getConfig(r *http.Request) (any, error) {
	subj := r.PathValue("subject")
	if subj == "" {
		return levelBody{h.reg.Level("")}, nil
	}
	if l, ok := h.reg.SubjectLevel(r.Context(), subj); ok {
		return levelBody{l}, nil
	}
	if flag(r, "defaultToGlobal") {
		return levelBody{h.reg.Level("")}, nil
	}
	return nil, errorf(http.StatusNotFound, codeSubjectLevelNotConfigured, "Subject '%s' does not have subject-level compatibility configured", subj)
}

func (h *handler) putConfig(r *http.Request) (any, error) {
	var req struct {
		Level Level `json:"compatibility"`
	}
	if err := decode(r, smallBody, &req); err != nil {
		return nil, err
	}
	l := Level(strings.ToUpper(string(req.Level)))
	if err := h.reg.SetLevel(r.Context(), r.PathValue("subject"), l); err != nil {
		return nil, err
	}
	return map[string]Level{"compatibility": l}, nil
}

func (h *handler) deleteConfig(r *http.Request) (any, error) {
	old, err := h.reg.DeleteLevel(r.Context(), r.PathValue("subject"))
	return levelBody{old}, err
}

type modeBody struct {
	Mode string `json:"mode"`
}

func (h *handler) putMode(r *http.Request) (any, error) {
	var req modeBody
	if err := decode(r, smallBody, &req); err != nil {
		return nil, err
	}
	if err := h.reg.SetMode(r.Context(), req.Mode); err != nil {
		return nil, err
	}
	return req, nil
}
