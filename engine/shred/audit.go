package shred

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

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

// AuditReader reads the audit stream back: an eventstore.Store does.
type AuditReader interface {
	ReadStream(ctx context.Context, stream string, from uint64, max int) ([]eventstore.Event, error)
}

// Reforget destroys again every key the audit stream says was destroyed,
// and returns how many it found alive. A keyring restored from a backup
// taken before a Forget holds the key again, and the subject's sealed
// fields — in the log, in snapshots, on the Kafka topic — would open
// again: call Reforget after restoring a keyring, before serving, with
// a store whose audit stream is at least as new as the forgetting (or
// ReforgetEvents with the audit events kept elsewhere). It
// appends no audit event: the forgetting it re-applies has one already.
// A subject the keyring has no record of gets its tombstone, so that no
// new key is made for it.
func (k *Keyring) Reforget(ctx context.Context, r AuditReader) (int, error) {
	revived := 0
	for from := uint64(1); ; {
		evs, err := r.ReadStream(ctx, AuditStream, from, 500)
		if err != nil {
			return revived, fmt.Errorf("shred: reforget: read %s: %w", AuditStream, err)
		}
		if len(evs) == 0 {
			return revived, nil
		}
		from = evs[len(evs)-1].Seq + 1
		n, err := k.ReforgetEvents(ctx, evs)
		revived += n
		if err != nil {
			return revived, err
		}
	}
}

// ReforgetEvents is Reforget of audit events read elsewhere — from the
// Kafka topic the log is published to (kafkabus.ReadTopic), which
// outlives a store restored from a backup older than the forgetting, or
// from an export of the audit stream. Events of other streams or types
// are skipped.
func (k *Keyring) ReforgetEvents(ctx context.Context, evs []eventstore.Event) (int, error) {
	revived := 0
	for _, ev := range evs {
		if ev.Stream != AuditStream || ev.Type != TypeSubjectForgotten {
			continue
		}
		var f Forgotten
		if err := json.Unmarshal(ev.Data, &f); err != nil {
			return revived, fmt.Errorf("shred: reforget: audit event %d: %w", ev.Position, err)
		}
		raw, err := hex.DecodeString(f.SubjectHash)
		if err != nil || len(raw) != len(hash{}) {
			return revived, fmt.Errorf("shred: reforget: audit event %d: subject hash %q is not 32 bytes in hex", ev.Position, f.SubjectHash)
		}
		var h hash
		copy(h[:], raw)
		alive, err := k.bury(ctx, h, f.At)
		if err != nil {
			return revived, fmt.Errorf("shred: reforget: %w", err)
		}
		if alive {
			revived++
		}
	}
	return revived, nil
}
