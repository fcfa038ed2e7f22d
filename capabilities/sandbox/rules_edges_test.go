package sandbox

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/confine"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// TestURLPortsWithUserInfo: user info before the host (a colon in it
// included) never passes for a port.
func TestURLPortsWithUserInfo(t *testing.T) {
	for _, c := range []struct {
		url  string
		port uint16
	}{
		{"https://user:@h.example/", 443},
		{"https://user:pw@h.example/", 443},
		{"http://user:pw@h.example:8080/", 8080},
	} {
		p := &plan{}
		p.url(c.url, "test")
		if p.anyConnect || len(p.connect) != 1 || p.connect[0] != c.port {
			t.Errorf("%s: connect %v, any %v; want %d", c.url, p.connect, p.anyConnect, c.port)
		}
	}
}

// TestSplitPort: the port is what follows the last colon, an empty host
// included; a bracketed IPv6 address without one has none.
func TestSplitPort(t *testing.T) {
	for _, c := range []struct {
		in, host string
		port     uint16
		err      bool
	}{
		{"h.example:8443", "h.example", 8443, false},
		{":80", "", 80, false},
		{"[::1]:9000", "[::1]", 9000, false},
		{"[::1]", "[::1]", 0, false},
		{"h.example", "h.example", 0, false},
		{"h:port", "", 0, true},
	} {
		host, port, err := splitPort(c.in)
		if host != c.host || port != c.port || (err != nil) != c.err {
			t.Errorf("splitPort(%q) = %q, %d, %v", c.in, host, port, err)
		}
		// The error quotes the port as written, not more.
		if err != nil && !strings.HasPrefix(err.Error(), `port "port": `) {
			t.Errorf("splitPort(%q): %v", c.in, err)
		}
	}
}

// TestNoShellCommandsNoExec: a [policy.shell] that lists no command
// starts no child, so nothing is made executable (not even this binary,
// the supervisor).
func TestNoShellCommandsNoExec(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, cmds := range [][]string{nil, {"/bin/true"}} {
		wf := &workflow.Workflow{Name: "s", Policy: &workflow.Policy{Shell: &workflow.ShellPolicy{Commands: cmds}}}
		p := derive(confine.Request{Workflow: wf}, func(string) string { return "" }, false)
		granted := false
		for _, r := range p.paths {
			if r.path == exe && r.access&rExec != 0 {
				granted = true
			}
		}
		if granted != (len(cmds) > 0) {
			t.Errorf("commands %v: this binary executable = %v", cmds, granted)
		}
	}
}

// TestNoLandlockCreatesNothing: Apply creates missing fs.write
// directories only to grant them exactly; on a kernel without Landlock
// there is nothing to grant, so nothing is created.
func TestNoLandlockCreatesNothing(t *testing.T) {
	kernel := detectABI
	t.Cleanup(func() { detectABI = kernel })
	for _, abi := range []int{0, kernel()} {
		detectABI = func() int { return abi }
		root := t.TempDir()
		wf := &workflow.Workflow{Name: "w", Policy: &workflow.Policy{FS: &workflow.FSPolicy{Write: []string{root + "/new/deeper/**"}}}}
		build(confine.Request{Workflow: wf}, true)
		_, err := os.Stat(root + "/new/deeper")
		if created := err == nil; created != (abi > 0) {
			t.Errorf("ABI %d: %s/new/deeper created = %v", abi, root, created)
		}
	}
}

// TestServerTLSFilesReadable: the server's certificate and key stay
// readable (SIGHUP reloads them), the client CA only when client auth is
// configured, and nothing is granted for a file that is not named.
func TestServerTLSFilesReadable(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir+"/cert.pem", "c")
	writeFile(t, dir+"/ca.pem", "a")
	for _, auth := range []*workflow.ClientAuth{nil, {Mode: "required", CAFile: "ca.pem"}} {
		wf := &workflow.Workflow{Name: "tls", Source: dir + "/workflow.toml", Policy: &workflow.Policy{},
			Server: &workflow.Server{TLS: &workflow.TLS{CertFile: "cert.pem", ClientAuth: auth}}}
		p := derive(confine.Request{Workflow: wf}, func(string) string { return "" }, false)
		read := map[string]bool{}
		for _, r := range p.paths {
			if r.access&rRead != 0 {
				read[r.path] = true
			}
		}
		if !read[dir+"/cert.pem"] || read[dir+"/ca.pem"] != (auth != nil) || read[dir] {
			t.Errorf("client auth %v: readable %v", auth, read)
		}
	}
}

// TestCoverageByABI: what each ABI leaves out is reported, exactly from
// the version that brings it on; "required" refuses below fullABI only.
func TestCoverageByABI(t *testing.T) {
	has := func(list []string, prefix string) bool {
		for _, s := range list {
			if strings.HasPrefix(s, prefix) {
				return true
			}
		}
		return false
	}
	for abi := 1; abi < len(configs); abi++ {
		enforced, not := coverage(configs[abi], abi, nil)
		for _, c := range []struct {
			prefix string
			from   int
		}{{"fs truncate", 3}, {"TCP connect and bind ports", 4}, {"device ioctl", 5}, {"abstract Unix socket and signal scoping", 6}} {
			if has(not, c.prefix) != (abi < c.from) {
				t.Errorf("ABI %d: not enforced %q, want %q listed only below ABI %d", abi, not, c.prefix, c.from)
			}
		}
		for _, c := range []struct {
			name string
			from int
		}{{"fs", 1}, {"net.connect", 4}, {"net.bind", 4}, {"scope.abstract_unix_socket", 6}, {"scope.signal", 6}} {
			if slices.Contains(enforced, c.name) != (abi >= c.from) {
				t.Errorf("ABI %d: enforced %q, want %q from ABI %d on", abi, enforced, c.name, c.from)
			}
		}
	}
	kernel := detectABI
	t.Cleanup(func() { detectABI = kernel })
	wf := &workflow.Workflow{Name: "r", Policy: &workflow.Policy{}, Sandbox: &workflow.Sandbox{Landlock: "required"}}
	for _, abi := range []int{fullABI - 1, fullABI} {
		detectABI = func() int { return abi }
		r, _ := build(confine.Request{Workflow: wf}, false)
		if refused := r.Refused != ""; refused != (abi < fullABI) {
			t.Errorf("required at ABI %d: refused %q", abi, r.Refused)
		}
	}
}

// TestUsableABI: what kiln counts as the kernel's Landlock ABI from what
// the kernel answered.
func TestUsableABI(t *testing.T) {
	fixed := func() (int, error) { return 2, nil }
	unfixed := func() (int, error) { return 1, nil }
	broken := func() (int, error) { return 0, errors.New("EINVAL") }
	newest := len(configs) - 1
	for _, c := range []struct {
		v      int
		err    error
		errata func() (int, error)
		want   int
	}{
		{0, errors.New("ENOSYS"), fixed, 0},
		{-1, nil, fixed, 0},
		{0, nil, fixed, 0},
		{1, nil, unfixed, 1},
		{5, nil, unfixed, 5},
		{6, nil, fixed, 6},
		{6, nil, unfixed, 5},
		{6, nil, broken, 5},
		{7, nil, fixed, 7},
		{newest + 3, nil, fixed, newest},
	} {
		if got := usableABI(c.v, c.err, c.errata); got != c.want {
			t.Errorf("usableABI(%d, %v) = %d, want %d", c.v, c.err, got, c.want)
		}
	}
}
