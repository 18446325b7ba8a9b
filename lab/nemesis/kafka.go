package nemesis

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/logbook/logbook/lab/faultnet"
)

// Broker is a single-node Kafka broker (KRaft, no ZooKeeper) of the
// nemesis's own, on free loopback ports, its data in a directory that
// outlives a SIGKILL: Restart starts it again on the same data, as an
// operator's supervisor would. It runs from the jars scripts/kafka.sh
// fetches (scripts/kafka/target/libs).
type Broker struct {
	Addr    string // host:port of the PLAINTEXT listener
	libs    string
	dir     string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
}

// brokerProperties is scripts/kafka/server.properties.in with its
// blanks filled; no initial group rebalance delay and a short broker
// session keep a restarted broker quick to serve: its controller (the
// same process) keeps the killed broker's registration until the
// session expires, and refuses the new one until then (9 s by default,
// most of a restart).
const brokerProperties = `process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:%[2]d
listeners=PLAINTEXT://127.0.0.1:%[1]d,CONTROLLER://127.0.0.1:%[2]d
advertised.listeners=PLAINTEXT://127.0.0.1:%[1]d
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=%[3]s
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
broker.heartbeat.interval.ms=300
broker.session.timeout.ms=1500
`

// KafkaLibs finds the broker's jars: dir if given, else
// $LOGBOOK_KAFKA_LIBS, else scripts/kafka/target/libs in the working
// directory or one of its parents (a test runs in its package's).
func KafkaLibs(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv("LOGBOOK_KAFKA_LIBS")
	}
	if dir != "" {
		if _, err := os.Stat(dir); err != nil {
			return "", fmt.Errorf("nemesis: the Kafka broker's jars: %w", err)
		}
		return dir, nil
	}
	wd, _ := os.Getwd()
	for d := wd; ; d = filepath.Dir(d) {
		libs := filepath.Join(d, "scripts", "kafka", "target", "libs")
		if _, err := os.Stat(libs); err == nil {
			return libs, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("nemesis: no Kafka broker jars (scripts/kafka.sh start fetches them into scripts/kafka/target/libs; or --kafka-libs DIR)")
		}
	}
}

// StartBroker formats a fresh data directory under dir and starts the
// broker on it.
func StartBroker(ctx context.Context, libs, dir string) (*Broker, error) {
	return startBroker(ctx, libs, dir, "")
}

// startBroker is StartBroker with one more listener per entry of
// nodeListeners, a KAFKA_NODE_LISTENERS value ("NAME:PORT:HOST:APORT …",
// see scripts/kafka.sh and faultnet.KafkaNodes).
func startBroker(ctx context.Context, libs, dir, nodeListeners string) (*Broker, error) {
	if _, err := exec.LookPath("java"); err != nil {
		return nil, errors.New("nemesis: no java for the Kafka broker (scripts/kafka.sh installs it)")
	}
	// The broker's own ports must differ from the node listeners' and
	// from each other: a port just closed can be handed out again.
	taken := map[int]bool{}
	for e := range strings.FieldsSeq(nodeListeners) {
		if f := strings.Split(e, ":"); len(f) == 4 {
			if p, err := strconv.Atoi(f[1]); err == nil {
				taken[p] = true
			}
		}
	}
	port, err := faultnet.FreePort(taken)
	if err != nil {
		return nil, err
	}
	taken[port] = true
	cport, err := faultnet.FreePort(taken)
	if err != nil {
		return nil, err
	}
	b := &Broker{Addr: "127.0.0.1:" + strconv.Itoa(port), libs: libs, dir: dir, logPath: filepath.Join(dir, "broker.log")}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	props := filepath.Join(dir, "server.properties")
	text := fmt.Sprintf(brokerProperties, port, cport, filepath.Join(dir, "data"))
	for e := range strings.FieldsSeq(nodeListeners) {
		f := strings.Split(e, ":")
		if len(f) != 4 {
			return nil, fmt.Errorf("nemesis: Kafka node listener %q: want NAME:PORT:HOST:APORT", e)
		}
		name := strings.ToUpper(f[0])
		text = strings.NewReplacer(
			"\nlisteners=", "\nlisteners="+name+"://127.0.0.1:"+f[1]+",",
			"\nadvertised.listeners=", "\nadvertised.listeners="+name+"://"+f[2]+":"+f[3]+",",
			"\nlistener.security.protocol.map=", "\nlistener.security.protocol.map="+name+":PLAINTEXT,",
		).Replace(text)
	}
	if err := os.WriteFile(props, []byte(text), 0o644); err != nil {
		return nil, err
	}
	// A cluster id is 16 random bytes in URL-safe base64 without padding,
	// what `StorageTool random-uuid` prints: one JVM start saved. Like
	// Kafka's own, it never starts with "-", which the tool's argument
	// parser would take for an option (one id in 64 did, and failed the
	// format).
	id := make([]byte, 16)
	cid := "-"
	for strings.HasPrefix(cid, "-") {
		_, _ = rand.Read(id)
		cid = base64.RawURLEncoding.EncodeToString(id)
	}
	format := exec.CommandContext(ctx, "java", "-cp", filepath.Join(libs, "*"), "-Dlog4j2.configurationFile="+filepath.Join(libs, "..", "..", "warn.yaml"),
		"kafka.tools.StorageTool", "format", "-t", cid, "-c", props)
	if out, err := format.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("nemesis: format the Kafka broker's storage: %v\n%s", err, out)
	}
	if err := b.start(ctx); err != nil {
		b.Stop()
		return nil, err
	}
	return b, nil
}

func (b *Broker) start(ctx context.Context) error {
	logf, err := os.OpenFile(b.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	from, _ := logf.Seek(0, 2)
	cmd := exec.Command("java", "-Xms128m", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-cp", filepath.Join(b.libs, "*"), "-Dlog4j2.configurationFile="+filepath.Join(b.libs, "..", "..", "log4j2.yaml"),
		"kafka.Kafka", filepath.Join(b.dir, "server.properties"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("nemesis: start the Kafka broker: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	b.cmd, b.done = cmd, done
	deadline := time.Now().Add(120 * time.Second)
	for {
		out, _ := os.ReadFile(b.logPath)
		if int64(len(out)) > from && strings.Contains(string(out[from:]), "Kafka Server started") {
			if c, err := net.DialTimeout("tcp", b.Addr, time.Second); err == nil {
				c.Close()
				return nil
			}
		}
		select {
		case <-done:
			return fmt.Errorf("nemesis: the Kafka broker exited while starting: %s", tail(string(out), 2000))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nemesis: the Kafka broker did not start in 120 s; see %s", b.logPath)
		}
	}
}

// Running reports whether the broker's process is alive.
func (b *Broker) Running() bool {
	if b == nil || b.done == nil {
		return false
	}
	select {
	case <-b.done:
		return false
	default:
		return true
	}
}

// Kill ends the broker with SIGKILL and waits until it is gone.
func (b *Broker) Kill() {
	if b.Running() {
		_ = b.cmd.Process.Kill()
		<-b.done
	}
}

// Restart starts the broker again on the same data directory and ports.
func (b *Broker) Restart(ctx context.Context) error {
	if b.Running() {
		return errors.New("nemesis: the Kafka broker still runs")
	}
	return b.start(ctx)
}

// Stop ends the broker (SIGTERM, SIGKILL after 15 s).
func (b *Broker) Stop() {
	if !b.Running() {
		return
	}
	_ = b.cmd.Process.Signal(syscall.SIGCONT)
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(15 * time.Second):
		b.Kill()
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
