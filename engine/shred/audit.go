package shred

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/logbook/logbook/engine/eventstore"
)

// AuditStream is the stream the audit events of forgetting go to, and
// AuditTag their tag.
const (
	AuditStream = "logbook-audit"
	AuditTag    = "audit"
	// TypeSubjectForgotten is the audit event's type. Its data is
	// Forgotten's JSON (without the position): the subject's keyed hash,
	// the key version destroyed, when, and by whom — never the subject's
	// id or anything that was sealed.
	TypeSubjectForgotten = "SubjectForgotten"
)

// AuditAppender is where audit events go: an eventstore.Store does.
type AuditAppender interface {
	Append(ctx context.Context, stream string, expect eventstore.ExpectedVersion, events []eventstore.NewEvent) (eventstore.AppendResult, error)
}

func appendAudit(ctx context.Context, a AuditAppender, f Forgotten) (uint64, error) {
	f.Position = 0
	data, err := json.Marshal(f)
	if err != nil {
		return 0, err
	}
	// One event per subject: its id is the hash's, so a retry is a
	// duplicate append the store answers with the first position.
	sum := sha256.Sum256([]byte("logbook shred audit\x00" + f.SubjectHash))
	var id eventstore.ID
	copy(id[:], sum[:])
	res, err := a.Append(ctx, AuditStream, eventstore.Any, []eventstore.NewEvent{{
		ID: id, Type: TypeSubjectForgotten, Version: 1, Tags: []string{AuditTag}, Data: data,
	}})
	if err != nil {
		return 0, err
	}
	return res.LastPosition, nil
}

// SubjectHashOf is the keyed hash a keyring under master gives subject,
// in hex, as the audit event names it: with the master key an operator
// can tell whether a given id was forgotten; without it, the audit
// events say nothing of who.
func SubjectHashOf(master MasterKey, subject string) string {
	k := Keyring{hashKey: hashKey(master)}
	h := k.hash(subject)
	return hex.EncodeToString(h[:])
}
