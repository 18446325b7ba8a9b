package shred

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// A Sealed goes through JSON whole, opens under its subject and field
// only, refuses plaintext where it is declared, and shows a forgotten
// subject's field as ForgottenText.
func TestSealedJSON(t *testing.T) {
	ctx := context.Background()
	k := mustOpen(t, dirOpener(t.TempDir()))
	defer k.Close()
	type payload struct {
		Email Sealed `json:"email"`
		Phone Sealed `json:"phone"`
	}
	s, err := k.SealField(ctx, "user/7", "email", "seven@example.org")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(payload{Email: s})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "seven@") || !strings.Contains(string(b), `"subject":"user/7","field":"email","sealed":"shred1:`) || !strings.Contains(string(b), `"phone":null`) {
		t.Fatalf("JSON %s", b)
	}
	var back payload
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if v, err := back.Email.Open(ctx, k); err != nil || v != "seven@example.org" {
		t.Fatalf("Open = %q, %v", v, err)
	}
	if v, err := back.Phone.Open(ctx, k); err != nil || v != "" || !back.Phone.IsZero() {
		t.Fatalf("zero Open = %q, %v", v, err)
	}
	if strings.Contains(s.String(), "seven") {
		t.Errorf("String() = %q shows the value", s)
	}

	// Moved to another subject or field: tampered.
	for _, moved := range []string{
		strings.Replace(string(b), `"subject":"user/7"`, `"subject":"user/8"`, 1),
		strings.Replace(string(b), `"field":"email"`, `"field":"phone"`, 1),
	} {
		var p payload
		if err := json.Unmarshal([]byte(moved), &p); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Email.Open(ctx, k); !errors.Is(err, ErrTampered) {
			t.Errorf("moved field opens: %v, want ErrTampered", err)
		}
	}
	// Plaintext, or an object missing its names, where a sealed field is
	// declared: refused.
	for _, bad := range []string{
		`{"email":{"subject":"user/7","field":"email","sealed":"seven@example.org"}}`,
		`{"email":{"subject":"user/7","field":"email","sealed":"shred1:c2V2ZW4"}}`,
		`{"email":{"field":"email","sealed":"` + s.Text() + `"}}`,
		`{"email":"seven@example.org"}`,
	} {
		var p payload
		if err := json.Unmarshal([]byte(bad), &p); err == nil {
			t.Errorf("%s decodes", bad)
		}
	}

	if _, err := k.Forget(ctx, "user/7", "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := back.Email.Open(ctx, k); !errors.Is(err, ErrForgotten) {
		t.Errorf("Open after Forget: %v", err)
	}
	if v, err := back.Email.Show(ctx, k); err != nil || v != ForgottenText {
		t.Errorf("Show after Forget = %q, %v", v, err)
	}
	if _, err := k.SealField(ctx, "user/7", "email", "x"); !errors.Is(err, ErrForgotten) {
		t.Errorf("SealField after Forget: %v", err)
	}
}
