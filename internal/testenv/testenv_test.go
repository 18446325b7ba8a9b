package testenv

import (
	"fmt"
	"strings"
	"testing"
)

// fakeTB records how a helper ended a test. Skip and Fatal stop the
// helper as the real ones do (runtime.Goexit there, a panic here).
type fakeTB struct {
	testing.TB
	ended string // "", "skip" or "fatal"
	msg   string
}

type stopped struct{}

func (f *fakeTB) Helper() {}
func (f *fakeTB) end(how, msg string) {
	f.ended, f.msg = how, msg
	panic(stopped{})
}
func (f *fakeTB) Skip(args ...any)                 { f.end("skip", fmt.Sprint(args...)) }
func (f *fakeTB) Skipf(format string, args ...any) { f.end("skip", fmt.Sprintf(format, args...)) }
func (f *fakeTB) Fatal(args ...any)                { f.end("fatal", fmt.Sprint(args...)) }
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.end("fatal", fmt.Sprintf(format, args...))
}

// run calls helper with a fake test and returns what it returned, or how
// it ended the test.
func run[T any](helper func(testing.TB) T) (v T, f *fakeTB) {
	f = &fakeTB{}
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(stopped); !ok {
				panic(r)
			}
		}
	}()
	return helper(f), f
}

func TestServerVariables(t *testing.T) {
	t.Setenv("LOGBOOK_SKIP_EXTERNAL", "")

	t.Run("set", func(t *testing.T) {
		t.Setenv("LOGBOOK_TEST_KAFKA", "127.0.0.1:1,127.0.0.1:2")
		for _, req := range []string{"", "1"} {
			t.Setenv(RequireEnv, req)
			got, f := run(Kafka)
			if f.ended != "" || strings.Join(got, " ") != "127.0.0.1:1 127.0.0.1:2" {
				t.Errorf("%s=%q: Kafka = %q, test ended %q (%s)", RequireEnv, req, got, f.ended, f.msg)
			}
		}
	})

	t.Run("unset, not required", func(t *testing.T) {
		t.Setenv("LOGBOOK_TEST_POSTGRES", "")
		t.Setenv(RequireEnv, "")
		got, f := run(URL)
		if f.ended != "skip" || got != "" {
			t.Fatalf("URL = %q, test ended %q, want a skip", got, f.ended)
		}
		for _, want := range []string{"LOGBOOK_TEST_POSTGRES not set: skipping", RequireEnv + "=1 to fail instead"} {
			if !strings.Contains(f.msg, want) {
				t.Errorf("skip message %q lacks %q", f.msg, want)
			}
		}
	})

	t.Run("unset, required", func(t *testing.T) {
		t.Setenv("LOGBOOK_TEST_REDIS", "")
		t.Setenv(RequireEnv, "1")
		t.Setenv("LOGBOOK_SKIP_EXTERNAL", "1") // required wins over the old opt-in
		got, f := run(Redis)
		if f.ended != "fatal" || got != "" {
			t.Fatalf("Redis = %q, test ended %q, want a failure", got, f.ended)
		}
		for _, want := range []string{"LOGBOOK_TEST_REDIS", "scripts/redis.sh"} {
			if !strings.Contains(f.msg, want) {
				t.Errorf("failure message %q lacks %q", f.msg, want)
			}
		}
	})
}

func TestToolVariables(t *testing.T) {
	t.Setenv("LOGBOOK_SKIP_EXTERNAL", "")
	missing := t.TempDir() + "/none"

	t.Setenv("LOGBOOK_TEST_PYTHON", missing) // named but absent: always a failure
	t.Setenv(RequireEnv, "")
	if _, f := run(Python); f.ended != "fatal" {
		t.Errorf("LOGBOOK_TEST_PYTHON naming no file: test ended %q, want a failure", f.ended)
	}

	t.Setenv("LOGBOOK_TEST_NGINX", "/opt/nginx")
	if got, f := run(Nginx); f.ended != "" || got != "/opt/nginx" {
		t.Errorf("Nginx = %q, test ended %q", got, f.ended)
	}

	t.Setenv("LOGBOOK_TEST_PYTHON", "")
	t.Setenv("LOGBOOK_SKIP_EXTERNAL", "1")
	if _, f := run(Python); f.ended != "skip" {
		t.Errorf("LOGBOOK_SKIP_EXTERNAL=1: Python's test ended %q, want a skip", f.ended)
	}
}

func TestTLSServerVariables(t *testing.T) {
	t.Setenv("LOGBOOK_SKIP_EXTERNAL", "")
	t.Setenv(RequireEnv, "1")
	t.Setenv("LOGBOOK_TEST_KAFKA_TLS", `{"ssl":"h:1","sasl_ssl":"h:2","ca":"/ca.pem","cert":"/c.pem","key":"/c.key","user":"u","password_file":"/pw"}`)
	want := KafkaTLSBroker{SSL: "h:1", SASLSSL: "h:2", CA: "/ca.pem", Cert: "/c.pem", Key: "/c.key", User: "u", PasswordFile: "/pw"}
	if got, f := run(KafkaTLS); f.ended != "" || got != want {
		t.Errorf("KafkaTLS = %+v, test ended %q (%s)", got, f.ended, f.msg)
	}
	t.Setenv("LOGBOOK_TEST_KAFKA_TLS", "127.0.0.1:19094")
	if _, f := run(KafkaTLS); f.ended != "fatal" || !strings.Contains(f.msg, "want the JSON") {
		t.Errorf("KafkaTLS of an address alone: test ended %q (%s), want a failure", f.ended, f.msg)
	}
	t.Setenv("LOGBOOK_TEST_POSTGRES_TLS", "")
	if _, f := run(PostgresTLS); f.ended != "fatal" || !strings.Contains(f.msg, "scripts/postgres.sh start --tls") {
		t.Errorf("PostgresTLS unset and required: test ended %q (%s), want a failure naming the script", f.ended, f.msg)
	}
}
