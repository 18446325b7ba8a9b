package registry

import (
	"os/exec"
	"testing"

	"github.com/logbook/logbook/internal/testenv"
)

// TestConfluentPythonClient runs testdata/confluent_client.py — Confluent's
// own SchemaRegistryClient, AvroSerializer and AvroDeserializer from PyPI —
// against the registry (see testenv.Python for where the client comes
// from).
func TestConfluentPythonClient(t *testing.T) {
	python := testenv.Python(t)
	f := newFixture(t)
	out, err := exec.Command(python, "testdata/confluent_client.py", f.srv.URL+"/registry", adminToken, viewerToken).CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("confluent_client.py: %v", err)
	}
}
