// Package pgtest runs a throwaway PostgreSQL cluster for the tests of a
// package: created in a fresh temporary directory, listening only on a
// Unix socket in it, started once by TestMain and stopped (and the
// directory removed) when the tests end. PostgreSQL refuses to run as
// root, so as root the cluster belongs to the unprivileged user nobody.
// Only tests import it.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kilnworks/kiln/runtime/testtool"
)

// cluster is the package's running cluster (nil: not started).
var (
	cluster    *Cluster
	missing    string // why there is no cluster: tools not installed
	startError error  // the tools are there but the cluster did not start
)

// Cluster is one running PostgreSQL server.
type Cluster struct {
	Dir  string // holds data/, the socket and the server log
	bin  string // folder of initdb, pg_ctl
	cred *syscall.Credential
}

// Main runs the package's tests with one cluster for all of them, then
// stops it: func TestMain(m *testing.M) { pgtest.Main(m) }.
func Main(m *testing.M) {
	cluster, missing, startError = start()
	code := m.Run()
	if cluster != nil {
		if err := cluster.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// DSN is the connection string of the cluster's postgres database, or
// reports the cluster missing (a skip, a failure under CI=true).
func DSN(t testing.TB) string {
	t.Helper()
	switch {
	case startError != nil:
		t.Fatalf("pgtest: %v", startError)
	case cluster == nil && missing != "":
		testtool.Missing(t, "%s", missing)
	case cluster == nil:
		t.Fatal("pgtest: no cluster: call pgtest.Main from TestMain")
	}
	return cluster.dsn("postgres")
}

// NewDatabase creates an empty database for one test, dropped when the
// test ends, and returns its connection string.
func NewDatabase(t testing.TB) string {
	t.Helper()
	admin := DSN(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "t_" + hex.EncodeToString(b)
	exec := func(sql string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		if err := exec("DROP DATABASE " + name + " WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database: %v", err)
		}
	})
	return cluster.dsn(name)
}

func (c *Cluster) dsn(db string) string {
	return fmt.Sprintf("host=%s port=5432 user=kiln dbname=%s sslmode=disable", c.Dir, db)
}

// Tools finds initdb and pg_ctl: on PATH, else in Debian's
// /usr/lib/postgresql/NN/bin (the newest).
func Tools() (dir string, ok bool) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := exec.LookPath("pg_ctl"); err == nil {
			return filepath.Dir(p), true
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if fileExists(filepath.Join(d, "initdb")) && fileExists(filepath.Join(d, "pg_ctl")) {
			return d, true
		}
	}
	return "", false
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func start() (*Cluster, string, error) {
	bin, ok := Tools()
	if !ok {
		return nil, "initdb and pg_ctl are not installed (run `make tools` as root: Debian's postgresql)", nil
	}
	dir, err := os.MkdirTemp("", "kiln-pg-")
	if err != nil {
		return nil, "", err
	}
	c := &Cluster{Dir: dir, bin: bin}
	if os.Geteuid() == 0 {
		// The server refuses root: the cluster is nobody's. The directory
		// is 0700 and nobody's, so only nobody (and root) reach the socket.
		u, err := user.Lookup("nobody")
		if err != nil {
			os.RemoveAll(dir)
			return nil, "", fmt.Errorf("running as root and there is no user nobody to own the cluster: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, "", err
		}
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	data := filepath.Join(dir, "data")
	if out, err := c.run("initdb", "-D", data, "-U", "kiln", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions"); err != nil {
		os.RemoveAll(dir)
		return nil, "", fmt.Errorf("initdb: %v\n%s", err, out)
	}
	conf := strings.Join([]string{
		"listen_addresses = ''", // the Unix socket only: no TCP at all
		"unix_socket_directories = '" + dir + "'",
		"max_connections = 200",
		// Speed without losing commits to a stopped server: fsync only
		// matters when the machine itself goes down, and commits still
		// reach the WAL before they return (the tests stop the server
		// with -m immediate and count what survived).
		"fsync = off", "full_page_writes = off",
	}, "\n") + "\n"
	f, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(conf)
		f.Close()
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", err
	}
	if out, err := c.run("pg_ctl", "start", "-D", data, "-l", filepath.Join(dir, "server.log"), "-w", "-t", "60"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
		os.RemoveAll(dir)
		return nil, "", fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	return c, "", nil
}

// Stop stops the server at once (pg_ctl stop -m immediate).
func (c *Cluster) Stop() error {
	if out, err := c.run("pg_ctl", "stop", "-D", filepath.Join(c.Dir, "data"), "-m", "immediate", "-w", "-t", "60"); err != nil {
		return fmt.Errorf("pg_ctl stop: %v\n%s", err, out)
	}
	return nil
}

// Start starts a stopped server again on the same socket.
func (c *Cluster) Start() error {
	data := filepath.Join(c.Dir, "data")
	if out, err := c.run("pg_ctl", "start", "-D", data, "-l", filepath.Join(c.Dir, "server.log"), "-w", "-t", "60"); err != nil {
		return fmt.Errorf("pg_ctl start: %v\n%s", err, out)
	}
	return nil
}

// Running returns the package's cluster, or reports it missing.
func Running(t testing.TB) *Cluster {
	t.Helper()
	DSN(t)
	return cluster
}

func (c *Cluster) stop() error {
	err := c.Stop()
	if rerr := os.RemoveAll(c.Dir); rerr != nil {
		err = errors.Join(err, rerr)
	}
	return err
}

func (c *Cluster) run(name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Dir = c.Dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	return cmd.CombinedOutput()
}
