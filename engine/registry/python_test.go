package registry

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestConfluentPythonClient runs testdata/confluent_client.py — Confluent's
// own SchemaRegistryClient, AvroSerializer and AvroDeserializer from PyPI —
// against the registry. The client lives in the virtual environment that
// scripts/pyenv.sh makes (scripts/test.sh runs it); LOGBOOK_TEST_PYTHON
// names another python. Without it the test fails, unless
// LOGBOOK_SKIP_EXTERNAL=1.
func TestConfluentPythonClient(t *testing.T) {
	if os.Getenv("LOGBOOK_SKIP_EXTERNAL") == "1" {
		t.Skip("LOGBOOK_SKIP_EXTERNAL=1: no Python client")
	}
	python := os.Getenv("LOGBOOK_TEST_PYTHON")
	if python == "" {
		root, err := filepath.Abs("../..")
		if err != nil {
			t.Fatal(err)
		}
		python = filepath.Join(root, ".cache", "pyenv", "bin", "python")
	}
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("no Python with confluent-kafka at %s: run scripts/pyenv.sh (LOGBOOK_SKIP_EXTERNAL=1 skips): %v", python, err)
	}
	f := newFixture(t)
	cmd := exec.Command(python, "testdata/confluent_client.py", f.srv.URL+"/registry", adminToken, viewerToken)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("confluent_client.py: %v", err)
	}
}
