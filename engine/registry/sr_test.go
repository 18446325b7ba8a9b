package registry

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
)

// TestFranzGoClient drives the registry with franz-go's pkg/sr client,
// configured the way users configure it for Confluent's registry: a base
// URL ending in /registry and basic auth.
func TestFranzGoClient(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	admin, err := sr.NewClient(sr.URLs(f.srv.URL+"/registry"), sr.BasicAuth("ci", adminToken))
	if err != nil {
		t.Fatal(err)
	}
	viewer, err := sr.NewClient(sr.URLs(f.srv.URL+"/registry"), sr.BearerToken(viewerToken))
	if err != nil {
		t.Fatal(err)
	}
	types, err := viewer.SupportedTypes(ctx)
	if err != nil || !slices.Equal(types, []sr.SchemaType{sr.TypeAvro}) {
		t.Fatalf("types %v, %v", types, err)
	}

	const subject = "orders-value"
	v1 := sr.Schema{Schema: `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"string"},{"name":"qty","type":"int"}]}`}
	v2 := sr.Schema{Schema: `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"string"},{"name":"qty","type":"long"},{"name":"note","type":["null","string"],"default":null}]}`}
	ss1, err := admin.CreateSchema(ctx, subject, v1)
	if err != nil || ss1.Version != 1 || ss1.ID != 1 {
		t.Fatalf("create v1: %+v, %v", ss1, err)
	}
	// The viewer may read but not write.
	if _, err := viewer.CreateSchema(ctx, subject, v2); !hasCode(err, 403) {
		t.Fatalf("viewer registered: %v", err)
	}
	// Under each level, evolve or be refused.
	levels := []struct {
		level sr.CompatibilityLevel
		ok    bool // int→long with a new optional field: backward only
	}{
		{sr.CompatBackward, true}, {sr.CompatBackwardTransitive, true},
		{sr.CompatForward, false}, {sr.CompatForwardTransitive, false},
		{sr.CompatFull, false}, {sr.CompatFullTransitive, false}, {sr.CompatNone, true},
	}
	for _, l := range levels {
		subj := "evolve-" + l.level.String()
		if res := admin.SetCompatibility(ctx, sr.SetCompatibility{Level: l.level}, subj); res[0].Err != nil || res[0].Level != l.level {
			t.Fatalf("set %s: %+v", l.level, res[0])
		}
		if res := viewer.Compatibility(ctx, subj); res[0].Err != nil || res[0].Level != l.level {
			t.Fatalf("get %s: %+v", l.level, res[0])
		}
		if _, err := admin.CreateSchema(ctx, subj, v1); err != nil {
			t.Fatal(err)
		}
		check, err := viewer.CheckCompatibility(sr.WithParams(ctx, sr.Verbose), subj, -1, v2)
		if err != nil || check.Is != l.ok || (!l.ok && len(check.Messages) == 0) {
			t.Fatalf("%s: check %+v, %v", l.level, check, err)
		}
		_, err = admin.CreateSchema(ctx, subj, v2)
		if l.ok && err != nil {
			t.Fatalf("%s: %v", l.level, err)
		}
		if !l.ok && !hasCode(err, 409) {
			t.Fatalf("%s: registering an incompatible schema: %v", l.level, err)
		}
	}

	ss2, err := admin.CreateSchema(ctx, subject, v2)
	if err != nil || ss2.Version != 2 {
		t.Fatalf("create v2: %+v, %v", ss2, err)
	}
	got, err := viewer.LookupSchema(ctx, subject, v1)
	if err != nil || got.ID != ss1.ID || got.Version != 1 {
		t.Fatalf("lookup: %+v, %v", got, err)
	}
	latest, err := viewer.SchemaByVersion(ctx, subject, -1)
	if err != nil || latest.ID != ss2.ID {
		t.Fatalf("latest: %+v, %v", latest, err)
	}
	subjects, err := viewer.Subjects(ctx)
	if err != nil || !slices.Contains(subjects, subject) {
		t.Fatalf("subjects %v, %v", subjects, err)
	}
	if _, err := viewer.SchemaByID(ctx, 999); !hasCode(err, 40403) {
		t.Fatalf("unknown id: %v", err)
	}

	// Serde: a producer encodes with v2's id, a consumer that only knows
	// v1 decodes by resolving v2's writer schema into its v1 reader.
	type OrderV2 struct {
		ID   string  `avro:"id"`
		Qty  int64   `avro:"qty"`
		Note *string `avro:"note"`
	}
	type OrderV1 struct {
		ID string `avro:"id"`
	}
	writer := avro.MustParse(latest.Schema.Schema)
	var prod sr.Serde
	prod.Register(ss2.ID, OrderV2{}, sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(writer, v) }))
	note := "gift"
	msg, err := prod.Encode(OrderV2{ID: "o-1", Qty: 3, Note: &note})
	if err != nil {
		t.Fatal(err)
	}
	if msg[0] != 0 || int(msg[1])<<24|int(msg[2])<<16|int(msg[3])<<8|int(msg[4]) != ss2.ID {
		t.Fatalf("wire format header % x", msg[:5])
	}
	id, _, err := prod.DecodeID(msg)
	if err != nil {
		t.Fatal(err)
	}
	wtext, err := viewer.SchemaByID(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	reader := avro.MustParse(`{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"string"}]}`)
	resolved, err := avro.NewSchemaCompatibility().Resolve(reader, avro.MustParse(wtext.Schema))
	if err != nil {
		t.Fatal(err)
	}
	var cons sr.Serde
	cons.Register(id, OrderV1{}, sr.DecodeFn(func(b []byte, v any) error { return avro.Unmarshal(resolved, b, v) }))
	var out OrderV1
	if err := cons.Decode(msg, &out); err != nil || out.ID != "o-1" {
		t.Fatalf("decode: %+v, %v", out, err)
	}

	// Deletes through the client.
	if err := admin.DeleteSchema(ctx, subject, 1, sr.SoftDelete); err != nil {
		t.Fatal(err)
	}
	if err := admin.DeleteSchema(ctx, subject, 1, sr.SoftDelete); !hasCode(err, 40406) {
		t.Fatalf("second soft delete: %v", err)
	}
	vs, err := admin.DeleteSubject(ctx, subject, sr.SoftDelete)
	if err != nil || !slices.Equal(vs, []int{2}) {
		t.Fatalf("delete subject: %v, %v", vs, err)
	}
	vs, err = admin.DeleteSubject(ctx, subject, sr.HardDelete)
	if err != nil || !slices.Equal(vs, []int{1, 2}) {
		t.Fatalf("hard delete subject: %v, %v", vs, err)
	}
	if _, err := viewer.SubjectVersions(ctx, subject); !hasCode(err, 40401) {
		t.Fatalf("versions of a deleted subject: %v", err)
	}
}

func hasCode(err error, code int) bool {
	var re *sr.ResponseError
	return errors.As(err, &re) && re.ErrorCode == code
}
