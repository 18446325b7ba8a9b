package shred

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
)

// ForgottenText is what Sealed.Show gives for a field whose subject was
// forgotten: what a reader renders in its place.
const ForgottenText = "[forgotten]"

// Sealed is one personal field of an event's payload (or of an aggregate's
// state, or a view's row) sealed under its data subject's key, for
// payloads encoded as JSON. It is made only by [Keyring.SealField] or by
// decoding one, so a payload type that declares a field Sealed cannot
// carry the plaintext by mistake: the field is ciphertext in the store,
// in snapshots, on the Kafka topic and in backups, and forgetting the
// subject makes it unreadable in all of them at once.
//
// Its JSON is an object that says whose field it is and under what name
// — both are the envelope's additional data, so a field copied to
// another subject or field fails to open (ErrTampered):
//
//	{"subject":"customer-42","field":"email","sealed":"shred1:…"}
//
// The subject's id stays readable after forgetting: use an id that is
// not personal data itself (a number, a UUID), never a name or an
// address. The zero Sealed (an absent field) is JSON null.
type Sealed struct {
	subject string
	field   string
	text    string // SealString's form; "" for the zero Sealed
}

// SealField seals value, the field named field of subject, into a Sealed
// (SealString). A forgotten subject is ErrForgotten: nothing new is
// sealed for it, and the caller records the field as absent or refuses
// the command.
func (k *Keyring) SealField(ctx context.Context, subject, field, value string) (Sealed, error) {
	text, err := k.SealString(ctx, subject, field, value)
	if err != nil {
		return Sealed{}, err
	}
	return Sealed{subject: subject, field: field, text: text}, nil
}

// Subject is the data subject's id the field belongs to.
func (s Sealed) Subject() string { return s.subject }

// Field is the field's name, as sealed.
func (s Sealed) Field() string { return s.field }

// Text is the sealed form (SealString's): "shred1:" and the envelope in
// base64.
func (s Sealed) Text() string { return s.text }

// IsZero reports whether s is the zero Sealed: no field.
func (s Sealed) IsZero() bool { return s.text == "" }

// String is the field's description, never its value.
func (s Sealed) String() string {
	if s.IsZero() {
		return "shred.Sealed{}"
	}
	return fmt.Sprintf("shred.Sealed{%s of %s}", s.field, s.subject)
}

// Open decrypts the field: ErrForgotten once its subject was forgotten,
// ErrTampered when it was altered or moved to another subject or field,
// ErrNoKey when the keyring never held the subject's key. The zero
// Sealed opens to "".
func (s Sealed) Open(ctx context.Context, k *Keyring) (string, error) {
	if s.IsZero() {
		return "", nil
	}
	return k.OpenString(ctx, s.subject, s.field, s.text)
}

// Show is Open for a reader that renders the field: a forgotten subject's
// field is ForgottenText, not an error. Other errors are returned.
func (s Sealed) Show(ctx context.Context, k *Keyring) (string, error) {
	v, err := s.Open(ctx, k)
	if errors.Is(err, ErrForgotten) {
		return ForgottenText, nil
	}
	return v, err
}

type sealedJSON struct {
	Subject string `json:"subject"`
	Field   string `json:"field"`
	Sealed  string `json:"sealed"`
}

// MarshalJSON implements json.Marshaler.
func (s Sealed) MarshalJSON() ([]byte, error) {
	if s.IsZero() {
		return []byte("null"), nil
	}
	return json.Marshal(sealedJSON{Subject: s.subject, Field: s.field, Sealed: s.text})
}

// UnmarshalJSON implements json.Unmarshaler. It refuses an object whose
// "sealed" is not an envelope (ErrNotSealed) — plaintext where a sealed
// field is declared — and one without its subject or field name.
func (s *Sealed) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		*s = Sealed{}
		return nil
	}
	var j sealedJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return fmt.Errorf("shred: a sealed field: %w", err)
	}
	if j.Subject == "" || j.Field == "" {
		return fmt.Errorf("shred: a sealed field without its subject or field name: %w", ErrNotSealed)
	}
	if len(j.Sealed) <= len(StringPrefix) || j.Sealed[:len(StringPrefix)] != StringPrefix {
		return fmt.Errorf("shred: a sealed field of %s: %w", j.Field, ErrNotSealed)
	}
	env, err := base64.RawURLEncoding.DecodeString(j.Sealed[len(StringPrefix):])
	if err != nil || !IsSealed(env) {
		return fmt.Errorf("shred: a sealed field of %s: %w", j.Field, ErrNotSealed)
	}
	*s = Sealed{subject: j.Subject, field: j.Field, text: j.Sealed}
	return nil
}
