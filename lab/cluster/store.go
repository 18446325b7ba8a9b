package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/logbook/logbook/internal/devca"
	"github.com/logbook/logbook/lab/cgroup"
)

// Store is a PostgreSQL server the cluster command started for itself:
// its own data directory and port on loopback, in its own control group.
type Store struct {
	URL  string
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
	// what Restart needs to start the server again
	args    []string
	cred    *syscall.Credential
	group   *cgroup.Group
	run     *Run
	logPath string
	setpriv int    // the length of the setpriv prefix of args
	addr    string // host:port
}

// postgresBin is the newest installed PostgreSQL's bin directory
// (Debian's layout; scripts/postgres.sh installs it).
func postgresBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	if len(dirs) == 0 {
		return "", errors.New("cluster: no PostgreSQL under /usr/lib/postgresql (scripts/postgres.sh installs it); or give --store")
	}
	sort.Slice(dirs, func(i, j int) bool {
		a, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		b, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return a < b
	})
	return dirs[len(dirs)-1], nil
}

// StartPostgres makes a fresh data directory (under the system's
// temporary directory, removed by Stop), writes its log into dir, starts PostgreSQL
// on a free loopback port in the run's group "postgres" with a quota of
// cpus (0: none), and waits until it accepts connections. As root it runs
// as the postgres user (PostgreSQL refuses root). fsync stays on: the
// write numbers must be honest.
func StartPostgres(ctx context.Context, run *Run, dir string, cpus float64) (*Store, error) {
	return startPostgres(ctx, run, dir, cpus, nil)
}

// StartPostgresTLS is StartPostgres with TLS, and TLS only, over TCP:
// ca signs the server's certificate (for 127.0.0.1 and localhost),
// pg_hba.conf rejects every connection over TCP without TLS, and URL
// asks for sslmode=verify-full with the CA, written beside the data
// directory, as sslrootcert. The server's key stays in its data
// directory, readable by the server's user only.
func StartPostgresTLS(ctx context.Context, run *Run, dir string, cpus float64, ca *devca.CA) (*Store, error) {
	if ca == nil {
		return nil, errors.New("cluster: StartPostgresTLS needs a CA")
	}
	return startPostgres(ctx, run, dir, cpus, ca)
}

func startPostgres(ctx context.Context, run *Run, dir string, cpus float64, ca *devca.CA) (*Store, error) {
	bin, err := postgresBin()
	if err != nil {
		return nil, err
	}
	// The data directory is a fresh one under the system's temporary
	// directory: the postgres user must reach it, and dir's parents may
	// be private to root.
	parent, err := os.MkdirTemp("", pgDirPrefix)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(parent, 0o755); err != nil {
		return nil, err
	}
	data := filepath.Join(parent, "pg")
	if err := os.Mkdir(data, 0o700); err != nil {
		return nil, err
	}
	if run != nil {
		run.TrackDir(parent)
	}
	var cred *syscall.Credential
	var setpriv []string
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("cluster: PostgreSQL will not run as root and there is no postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(data, uid, gid); err != nil {
			return nil, err
		}
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		setpriv = []string{"/usr/bin/setpriv", "--reuid=" + u.Uid, "--regid=" + u.Gid, "--clear-groups", "--"}
	}
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "logbook", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("cluster: initdb: %v\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	var group *cgroup.Group
	if run != nil {
		if group, err = run.Group("postgres", "store", cpus); err != nil {
			return nil, err
		}
	}
	args := append(setpriv, filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", data,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=400", "-c", "shared_buffers=256MB",
		"-c", "max_wal_size=4GB", "-c", "fsync=on", "-c", "synchronous_commit=on", "-c", "logging_collector=off")
	url := fmt.Sprintf("postgres://logbook@127.0.0.1:%d/postgres?sslmode=disable", port)
	if ca != nil {
		caFile, err := pgTLS(parent, data, cred, ca)
		if err != nil {
			return nil, err
		}
		args = append(args, "-c", "ssl=on", "-c", "ssl_cert_file=server.crt", "-c", "ssl_key_file=server.key",
			"-c", "ssl_min_protocol_version=TLSv1.2")
		url = fmt.Sprintf("postgres://logbook@127.0.0.1:%d/postgres?sslmode=verify-full&sslrootcert=%s", port, caFile)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(bin), "lib", "pg_stat_statements.so")); err == nil {
		// Statements counted and timed, for the benchmarks that read what
		// PostgreSQL did per request (bench scaling's write mode).
		args = append(args, "-c", "shared_preload_libraries=pg_stat_statements", "-c", "pg_stat_statements.track=all")
	}
	s := &Store{URL: url, dir: data, addr: "127.0.0.1:" + strconv.Itoa(port),
		args: args, cred: cred, group: group, run: run, logPath: filepath.Join(dir, "postgres.log"), setpriv: len(setpriv)}
	if err := s.start(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// pgTLS writes the server's certificate and key, signed by ca, into the
// data directory (owned by cred's user when set), the CA beside it
// (returned), and a pg_hba.conf that takes TCP connections over TLS only,
// replication ones included; the Unix socket stays trusted.
func pgTLS(parent, data string, cred *syscall.Credential, ca *devca.CA) (string, error) {
	pair, err := ca.Issue(devca.Leaf{Name: "localhost", Hosts: []string{"localhost", "127.0.0.1"}})
	if err != nil {
		return "", err
	}
	crt, key, err := pair.Write(data, "server")
	if err != nil {
		return "", err
	}
	caFile, err := ca.WriteCA(parent, "ca")
	if err != nil {
		return "", err
	}
	hba := filepath.Join(data, "pg_hba.conf")
	if err := os.WriteFile(hba, []byte(`# written by logbook's cluster package: TLS or nothing over TCP
local     all         all                trust
hostssl   all         all   127.0.0.1/32 trust
hostssl   replication all   127.0.0.1/32 trust
hostnossl all         all   0.0.0.0/0    reject
hostnossl replication all   0.0.0.0/0    reject
`), 0o600); err != nil {
		return "", err
	}
	if cred != nil {
		for _, f := range []string{crt, key, hba} {
			if err := os.Chown(f, int(cred.Uid), int(cred.Gid)); err != nil {
				return "", err
			}
		}
	}
	return caFile, nil
}

// start starts the server on its data directory and waits until it
// accepts connections.
func (s *Store) start(ctx context.Context) error {
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	args := s.args
	cmd := groupCommand(s.group, args[0], args[1:]...)
	if s.group == nil && s.cred != nil {
		cmd = exec.Command(args[s.setpriv], args[s.setpriv+1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("cluster: start PostgreSQL: %w", err)
	}
	if s.run != nil {
		s.run.Track("postgres", cmd.Process.Pid)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	s.cmd, s.done = cmd, done
	addr := s.addr
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-done:
			out, _ := os.ReadFile(s.logPath)
			return fmt.Errorf("cluster: PostgreSQL exited: %s", tail(string(out), 2000))
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			conn, err := pgx.Connect(cctx, s.URL)
			cancel()
			if err == nil {
				_ = conn.Close(ctx)
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return errors.New("cluster: PostgreSQL did not accept connections within 60s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Restart starts a server that Kill or Halt ended, on the same data
// directory and port: after Kill, PostgreSQL recovers from its
// write-ahead log first.
func (s *Store) Restart(ctx context.Context) error {
	if s.Running() {
		return errors.New("cluster: PostgreSQL still runs")
	}
	return s.start(ctx)
}

// Running reports whether the server's main process is alive.
func (s *Store) Running() bool {
	if s == nil || s.done == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Pid is the server's main process (the postmaster), 0 if none runs.
func (s *Store) Pid() int {
	if !s.Running() {
		return 0
	}
	return s.cmd.Process.Pid
}

// Kill crashes the server: the postmaster is stopped, every process it
// started is killed with SIGKILL, then the postmaster too — no
// checkpoint, no shutdown, as a power cut of the database's machine
// (its disk's cache aside) would leave it. It waits until all are gone.
func (s *Store) Kill() {
	if !s.Running() {
		return
	}
	pid := s.cmd.Process.Pid
	_ = syscall.Kill(pid, syscall.SIGSTOP) // no new backend forks meanwhile
	children := childrenOf(pid)
	for _, c := range children {
		_ = syscall.Kill(c, syscall.SIGKILL)
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	// The backends must be gone before a restart, or PostgreSQL finds
	// their shared memory still attached.
	deadline := time.Now().Add(10 * time.Second)
	for _, c := range children {
		for syscall.Kill(c, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// Halt shuts the server down cleanly (smart shutdown is too polite for
// a pool that never disconnects: fast, SIGINT, which ends the sessions
// and checkpoints) and keeps its data directory for Restart.
func (s *Store) Halt() {
	if !s.Running() {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.Kill()
	}
}

// childrenOf lists the processes whose parent is pid (from /proc).
func childrenOf(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name, in parentheses, may hold spaces: the fields
		// follow its last ')'.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, c)
		}
	}
	return out
}

// Stop shuts PostgreSQL down (fast shutdown: SIGINT) and removes its data
// directory.
func (s *Store) Stop() {
	if s == nil || s.dir == "" {
		return
	}
	if s.Running() {
		_ = s.cmd.Process.Signal(syscall.SIGCONT) // a stopped server cannot shut down
		s.Halt()
	}
	parent := filepath.Dir(s.dir)
	if !strings.HasPrefix(filepath.Base(parent), pgDirPrefix) {
		return // never remove what this package did not make
	}
	_ = os.RemoveAll(parent)
}

// pgDirPrefix names the temporary directories of the PostgreSQL servers
// this package starts.
const pgDirPrefix = "logbook-cluster-pg-"
