package stages

import (
	"context"

	"github.com/logbook/logbook/engine/kafkabus"
	"github.com/logbook/logbook/engine/registry"
)

// The stage events, Avro records in the schema registry's wire format,
// each registered under its topic's subject ("<topic>-value").

// requestFields are the fields every stage event starts with: the send
// request it belongs to and the chunk of its recipients.
const requestFields = `{"name":"request","type":"string"},` +
	`{"name":"type","type":"string"},` +
	`{"name":"club_id","type":"long"},` +
	`{"name":"sender","type":"string"},` +
	`{"name":"timestamp_ms","type":"long"},` +
	`{"name":"chunk","type":"int"},`

// Chunk is a slice of one send request's recipients: the input of the
// preference stage. A request's chunks are written in one transaction.
type Chunk struct {
	Request   string  `avro:"request"`
	Type      string  `avro:"type"`
	ClubID    int64   `avro:"club_id"`
	Sender    string  `avro:"sender"`
	Timestamp int64   `avro:"timestamp_ms"`
	Chunk     int32   `avro:"chunk"`
	Chunks    int32   `avro:"chunks"`
	UserIDs   []int64 `avro:"user_ids"`
}

// ChunkSchema is Chunk's schema.
const ChunkSchema = `{"type":"record","name":"NotificationChunk","namespace":"logbook.notify","doc":"A slice of a send request's recipients.","fields":[` +
	requestFields +
	`{"name":"chunks","type":"int"},` +
	`{"name":"user_ids","type":{"type":"array","items":"long"}}]}`

// Recipient is one recipient who passed the preference check, with the
// channels to build.
type Recipient struct {
	UserID   int64    `avro:"user_id"`
	Channels []string `avro:"channels"`
}

// Checked is what the preference check made of a chunk: the input of
// the build stage.
type Checked struct {
	Request    string           `avro:"request"`
	Type       string           `avro:"type"`
	ClubID     int64            `avro:"club_id"`
	Sender     string           `avro:"sender"`
	Timestamp  int64            `avro:"timestamp_ms"`
	Chunk      int32            `avro:"chunk"`
	Recipients []Recipient      `avro:"recipients"`
	Refused    map[string]int64 `avro:"refused"` // recipients refused, by reason
}

// CheckedSchema is Checked's schema.
const CheckedSchema = `{"type":"record","name":"NotificationChecked","namespace":"logbook.notify","doc":"A chunk's recipients after the preference check.","fields":[` +
	requestFields +
	`{"name":"recipients","type":{"type":"array","items":{"type":"record","name":"Recipient","fields":[` +
	`{"name":"user_id","type":"long"},{"name":"channels","type":{"type":"array","items":"string"}}]}}},` +
	`{"name":"refused","type":{"type":"map","values":"long"}}]}`

// Message is one built delivery (notify.Message).
type Message struct {
	Key     string   `avro:"key"`
	UserID  int64    `avro:"user_id"`
	Channel string   `avro:"channel"`
	To      []string `avro:"to"`
	Title   string   `avro:"title"`
	Body    string   `avro:"body"`
}

// Batch is one delivery call's messages, of one channel: the input of
// the delivery stage. Index numbers a chunk's batches of a channel.
type Batch struct {
	Request   string    `avro:"request"`
	Type      string    `avro:"type"`
	ClubID    int64     `avro:"club_id"`
	Sender    string    `avro:"sender"`
	Timestamp int64     `avro:"timestamp_ms"`
	Chunk     int32     `avro:"chunk"`
	Channel   string    `avro:"channel"`
	Index     int32     `avro:"index"`
	Messages  []Message `avro:"messages"`
}

// BatchSchema is Batch's schema.
const BatchSchema = `{"type":"record","name":"NotificationBatch","namespace":"logbook.notify","doc":"The messages of one delivery call.","fields":[` +
	requestFields +
	`{"name":"channel","type":"string"},` +
	`{"name":"index","type":"int"},` +
	`{"name":"messages","type":{"type":"array","items":{"type":"record","name":"Message","fields":[` +
	`{"name":"key","type":"string"},{"name":"user_id","type":"long"},{"name":"channel","type":"string"},` +
	`{"name":"to","type":{"type":"array","items":"string"}},{"name":"title","type":"string"},{"name":"body","type":"string"}]}}}]}`

// Outcome is what one batch's delivery came to: the delivery stage's
// output, which metrics and audits read.
type Outcome struct {
	Request   string  `avro:"request"`
	Type      string  `avro:"type"`
	ClubID    int64   `avro:"club_id"`
	Sender    string  `avro:"sender"`
	Timestamp int64   `avro:"timestamp_ms"`
	Chunk     int32   `avro:"chunk"`
	Channel   string  `avro:"channel"`
	Index     int32   `avro:"index"`
	Delivered int64   `avro:"delivered"`
	Failed    int64   `avro:"failed"`
	Retries   int64   `avro:"retries"`
	Reason    string  `avro:"reason"`        // why the batch failed for good ("" if delivered)
	UserIDs   []int64 `avro:"dead_user_ids"` // the recipients of a failed batch, to replay
}

// OutcomeSchema is Outcome's schema.
const OutcomeSchema = `{"type":"record","name":"NotificationOutcome","namespace":"logbook.notify","doc":"What a delivery call came to.","fields":[` +
	requestFields +
	`{"name":"channel","type":"string"},` +
	`{"name":"index","type":"int"},` +
	`{"name":"delivered","type":"long"},` +
	`{"name":"failed","type":"long"},` +
	`{"name":"retries","type":"long"},` +
	`{"name":"reason","type":"string"},` +
	`{"name":"dead_user_ids","type":{"type":"array","items":"long"}}]}`

// Codecs are the stage events' Avro codecs, registered under their
// topics' subjects.
type Codecs struct {
	Chunk   *kafkabus.AvroValue[Chunk]
	Checked *kafkabus.AvroValue[Checked]
	Batch   *kafkabus.AvroValue[Batch]
	Outcome *kafkabus.AvroValue[Outcome]
}

// NewCodecs returns the codecs unregistered: they decode (any schema id),
// but encode under id 0.
func NewCodecs() *Codecs {
	return &Codecs{
		Chunk:   kafkabus.MustAvroValue[Chunk](ChunkSchema),
		Checked: kafkabus.MustAvroValue[Checked](CheckedSchema),
		Batch:   kafkabus.MustAvroValue[Batch](BatchSchema),
		Outcome: kafkabus.MustAvroValue[Outcome](OutcomeSchema),
	}
}

// RegisterCodecs registers the four schemas in schemas under the topics'
// subjects and returns the codecs.
func RegisterCodecs(ctx context.Context, schemas registry.Schemas, t Topics) (*Codecs, error) {
	c := NewCodecs()
	for _, r := range []struct {
		topic string
		reg   func(context.Context, registry.Schemas, string) error
	}{
		{t.Requests, c.Chunk.Register}, {t.Checked, c.Checked.Register},
		{t.Built, c.Batch.Register}, {t.Outcomes, c.Outcome.Register},
	} {
		if err := r.reg(ctx, schemas, r.topic+"-value"); err != nil {
			return nil, err
		}
	}
	return c, nil
}
