package auth

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// usable checks that every token t holds for a role authenticates with
// that role when sent as a bearer token, and that a token the parser
// refused does not.
func usable(t *testing.T, toks *Tokens, want map[string]Role) {
	t.Helper()
	if toks.Len() != len(want) {
		t.Fatalf("%d tokens kept, %d accepted", toks.Len(), len(want))
	}
	h := toks.RequireRole(editor, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for tok, role := range want {
		if got, ok := toks.Lookup(tok); !ok || got != role {
			t.Fatalf("token %q: role %q %v, want %q", tok, got, ok, role)
		}
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		wantCode := 200
		if role != editor {
			wantCode = 403
		}
		if rec.Code != wantCode {
			t.Fatalf("token %q of role %s was accepted but authenticates as %d, want %d", tok, role, rec.Code, wantCode)
		}
	}
}

// FuzzParseFile: a token file either fails as a whole or gives exactly
// the tokens of its lines, each of which then authenticates with its role.
func FuzzParseFile(f *testing.F) {
	f.Add([]byte("# tokens\n\neditor-secret editor\nviewer-secret viewer\n"))
	f.Add([]byte("  spaced-token \t viewer  \r\n#x y z\n"))
	f.Add([]byte("only-one-field\n"))
	f.Add([]byte("short editor\n"))
	f.Add([]byte("long-enough-token god\n"))
	f.Add([]byte("same-token-1 editor\nsame-token-1 viewer\n"))
	f.Add([]byte("tok\x00en-123 viewer\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		toks, err := ParseFile(bytes.NewReader(src), "f", testRoles)
		if err != nil {
			return
		}
		want := map[string]Role{}
		for _, line := range strings.Split(string(src), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			fs := strings.Fields(line)
			want[fs[0]] = Role(fs[1])
		}
		usable(t, toks, want)
	})
}

// FuzzParseEnv: the same for LOGBOOK_TOKENS.
func FuzzParseEnv(f *testing.F) {
	f.Add("aaaaaaaa:editor, bbbbbbbb:viewer")
	f.Add("aaaaaaaa")
	f.Add(",,aaaaaaaa:viewer,")
	f.Add("aaaa aaaa:viewer")
	f.Add("aaaaaaaa\t:viewer")
	f.Add("a:b:editor")
	f.Fuzz(func(t *testing.T, v string) {
		toks, err := ParseEnv(v, testRoles)
		if err != nil {
			return
		}
		want := map[string]Role{}
		for _, item := range strings.Split(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				tok, role, _ := strings.Cut(item, ":")
				want[tok] = Role(role)
			}
		}
		usable(t, toks, want)
	})
}
