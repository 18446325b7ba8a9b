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

	"github.com/logbook/logbook/lab/cgroup"
)

// Store is a PostgreSQL server the cluster command started for itself:
// its own data directory and port on loopback, in its own control group.
type Store struct {
	URL  string
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
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
	if _, err := os.Stat(filepath.Join(filepath.Dir(bin), "lib", "pg_stat_statements.so")); err == nil {
		// Statements counted and timed, for the benchmarks that read what
		// PostgreSQL did per request (bench scaling's write mode).
		args = append(args, "-c", "shared_preload_libraries=pg_stat_statements", "-c", "pg_stat_statements.track=all")
	}
	logf, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		return nil, err
	}
	cmd := groupCommand(group, args[0], args[1:]...)
	if group == nil && cred != nil {
		cmd = exec.Command(args[len(setpriv)], args[len(setpriv)+1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("cluster: start PostgreSQL: %w", err)
	}
	if run != nil {
		run.Track("postgres", cmd.Process.Pid)
	}
	s := &Store{URL: fmt.Sprintf("postgres://logbook@127.0.0.1:%d/postgres?sslmode=disable", port), dir: data, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(s.done) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-s.done:
			out, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
			return nil, fmt.Errorf("cluster: PostgreSQL exited: %s", tail(string(out), 2000))
		default:
		}
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second); err == nil {
			c.Close()
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			conn, err := pgx.Connect(cctx, s.URL)
			cancel()
			if err == nil {
				_ = conn.Close(ctx)
				return s, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.Stop()
			return nil, errors.New("cluster: PostgreSQL did not accept connections within 60s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop shuts PostgreSQL down (fast shutdown: SIGINT) and removes its data
// directory.
func (s *Store) Stop() {
	if s == nil || s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
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
