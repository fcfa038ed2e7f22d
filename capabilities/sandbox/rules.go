package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"github.com/kilnworks/kiln/capabilities/internal/wfpath"
	"github.com/kilnworks/kiln/runtime/confine"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Access rights, by what kiln's policy calls them.
const (
	rRead    = ll.AccessFSReadFile
	rList    = ll.AccessFSReadDir
	rExec    = ll.AccessFSExecute | ll.AccessFSReadFile
	rDelete  = ll.AccessFSRemoveFile | ll.AccessFSRemoveDir
	rReadDir = ll.AccessFSReadFile | ll.AccessFSReadDir
	// rWrite is what write_file does: create directories and a temporary
	// file, write it and rename it over the target (which removes the
	// old file), all in the target's directory.
	rWrite = ll.AccessFSWriteFile | ll.AccessFSTruncate | ll.AccessFSMakeReg | ll.AccessFSMakeDir | ll.AccessFSRemoveFile
	// rState is the state directory and log targets: read and write.
	rState = rWrite | rReadDir
	// fileRights are the rights the kernel accepts on a non-directory.
	fileRights = ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev
)

// pathRule grants access on path: the file, or the whole hierarchy
// beneath a directory.
type pathRule struct {
	path   string
	access uint64
	dir    bool
	why    string // "fs.read /data/**", "state directory", ...
}

// plan is the ruleset derived from a workflow tree and the CLI's request.
type plan struct {
	paths []pathRule
	// connect and bind are the TCP ports allowed; anyConnect/anyBind
	// mean a port could not be bounded, so that right is not handled.
	connect, bind       []uint16
	anyConnect, anyBind bool
	// notEnforced are what the ruleset cannot express, one phrase each.
	notEnforced []string
	// mkdir creates a missing fs.write directory so that the grant is
	// exact; without it (the preflight plan) the creation is reported
	// and planned lists the directories Apply would create.
	mkdir   bool
	planned map[string]bool
}

// System locations. Children of shell_run and MCP stdio servers need the
// dynamic loader and shared libraries to start; the resolver and TLS need
// their configuration and the CA bundle. Each is granted read (and, for
// libraries, execute) only when it exists and only when the workflow has
// children or network needs.
var (
	libraryDirs = []string{"/lib", "/lib64", "/lib32", "/usr/lib", "/usr/lib64", "/usr/lib32", "/usr/libexec"}
	// loaderFiles are the dynamic loader's cache and the configuration
	// OpenSSL reads when a program linked with it starts (node does).
	loaderFiles  = []string{"/etc/ld.so.cache", "/etc/ld.so.preload", "/etc/ssl/openssl.cnf"}
	resolverFile = []string{"/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf"}
	// caFiles and caDirs are where Go's crypto/x509 looks for the system
	// roots on Linux; /usr/share/ca-certificates holds what the
	// /etc/ssl/certs links point to.
	caFiles = []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt",
		"/etc/ssl/ca-bundle.pem", "/etc/pki/tls/cacert.pem", "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", "/etc/ssl/cert.pem"}
	caDirs = []string{"/etc/ssl/certs", "/etc/pki/tls/certs", "/usr/share/ca-certificates"}
)

// derive computes the ruleset of req: the root workflow's [policy] (child
// workflows run under it), what every workflow of the tree declares
// (servers, backends, secrets, TLS files), and what the CLI touches.
func derive(req confine.Request, getenv func(string) string, mkdir bool) *plan {
	p := &plan{mkdir: mkdir}
	children := false
	if pol := req.Workflow.Policy; pol != nil {
		if fs := pol.FS; fs != nil {
			read := uint64(rRead)
			if len(fs.List) == 0 {
				read = rReadDir // list falls back to read
			}
			p.patterns(fs.Read, read, "fs.read", false)
			p.patterns(fs.List, rList, "fs.list", false)
			p.writeRoots(fs.Write)
			p.patterns(fs.Write, rWrite, "fs.write", true)
			p.patterns(fs.Delete, rDelete, "fs.delete", true)
		}
		if sh := pol.Shell; sh != nil && len(sh.Commands) > 0 {
			children = true
			p.patterns(sh.Commands, rExec, "shell.commands", false)
			// Commands run under a supervisor: this binary, executed again.
			if exe, err := os.Executable(); err == nil {
				p.file(exe, rExec, "shell supervisor (this binary)", false)
			}
		}
		if h := pol.HTTP; h != nil {
			for _, u := range h.URLs {
				p.url(u, "[policy.http] "+u)
			}
		}
	}
	for _, w := range workflow.Tree(req.Workflow) {
		// Files the workflow declares are relative to its folder first.
		dir := ""
		if w.Source != "" {
			dir = filepath.Dir(w.Source)
		}
		declared := func(path, why string) {
			if path != "" {
				p.file(wfpath.Resolve(dir, path), rRead, why, false)
			}
		}
		// TLS material is read again on SIGHUP (and the server's when
		// serve mode starts listening, after confinement).
		if sv := w.Server; sv != nil && sv.TLS != nil {
			declared(sv.TLS.CertFile, "[server.tls] cert_file")
			declared(sv.TLS.KeyFile, "[server.tls] key_file")
			if ca := sv.TLS.ClientAuth; ca != nil {
				declared(ca.CAFile, "[server.tls.client_auth] ca_file")
			}
		}
		for _, s := range w.MCPServers {
			switch {
			case len(s.Command) > 0:
				children = true
				p.command(s.Command[0], "mcp_servers "+s.Name)
			case s.URL != "":
				p.url(s.URL, "mcp_servers "+s.Name)
				if t := s.TLS; t != nil {
					declared(t.CertFile, "mcp_servers "+s.Name+" tls.cert_file")
					declared(t.KeyFile, "mcp_servers "+s.Name+" tls.key_file")
					declared(t.CAFile, "mcp_servers "+s.Name+" tls.ca_file")
				}
				if s.Auth != nil {
					for _, h := range s.Auth.Hosts {
						p.url("https://"+h+"/", "mcp_servers "+s.Name+" auth.hosts")
					}
				}
			}
		}
		if in := w.Intelligence; in != nil {
			for _, b := range in.Backends {
				if b.BaseURL != "" {
					p.url(b.BaseURL, "intelligence "+b.Name)
				} else {
					p.addPort(&p.connect, 443) // the providers' public APIs
				}
			}
		}
		for _, s := range w.Secrets {
			switch s.Source {
			case "file":
				declared(s.Path, "secret "+s.Name)
			case "command":
				if len(s.Argv) > 0 {
					children = true
					p.command(s.Argv[0], "secret "+s.Name)
				}
			case "oauth2":
				p.url(s.TokenURL, "secret "+s.Name+" token_url")
			}
		}
		if lg := w.Logging; lg != nil && lg.OTel != nil {
			p.otel(lg.OTel.Endpoint, getenv)
		}
	}

	if req.StateDir != "" {
		p.ownDir(req.StateDir)
		p.file(req.StateDir, rState, "state directory", true)
	}
	for _, f := range req.ReadFiles {
		p.file(f, rRead, "--input", false)
	}
	for _, f := range req.WriteFiles {
		if _, err := os.Stat(f); err != nil {
			p.file(filepath.Dir(f), rWrite, "log file "+f+" (not created yet)", true)
			continue
		}
		p.file(f, rState&fileRights, "log file", false)
	}
	for _, d := range req.WriteDirs {
		p.ownDir(d)
		p.file(d, rState, "directory of a rotated log, --record or --record-dir", true)
	}
	// os/exec opens /dev/null for a child's unused standard streams.
	p.file(os.DevNull, ll.AccessFSReadFile|ll.AccessFSWriteFile, "null device", false)
	if children {
		p.system(libraryDirs, rExec|rList, "shared libraries")
		p.system(loaderFiles, rRead, "dynamic loader cache")
	}
	if len(p.connect) > 0 || p.anyConnect {
		p.system(resolverFile, rRead, "name resolution")
		p.system(caFiles, rRead, "CA bundle")
		p.system(caDirs, rReadDir, "CA certificates")
		for _, v := range []string{"SSL_CERT_FILE", "SSL_CERT_DIR"} {
			for _, f := range filepath.SplitList(getenv(v)) {
				p.system([]string{f}, rReadDir, v)
			}
		}
		// The resolver falls back to TCP for long answers.
		p.addPort(&p.connect, 53)
	}
	for _, b := range req.Binds {
		// Port 0 is a rule of its own: it allows an ephemeral port only.
		_, port, err := splitPort(b)
		if err != nil {
			p.anyBind = true
			p.notEnforced = append(p.notEnforced, fmt.Sprintf("net.bind: listener address %q: %v, so TCP bind is not restricted", b, err))
			continue
		}
		p.addPort(&p.bind, port)
	}
	return p
}

// patterns adds the rules of kiln policy patterns. Landlock grants on
// whole hierarchies, so a pattern becomes the deepest directory it names;
// kiln's own checks keep matching the exact pattern.
func (p *plan) patterns(pats []string, access uint64, what string, create bool) {
	for _, pat := range pats {
		why := what + " " + pat
		switch {
		case pat == "*":
			p.file("/", access, why, create)
		case !filepath.IsAbs(pat):
			// Policy targets are absolute after resolution: a relative
			// pattern matches nothing, so it grants nothing here either.
			p.notEnforced = append(p.notEnforced, why+": relative pattern, grants nothing")
		case strings.HasSuffix(pat, "/**"):
			p.file(filepath.Clean(strings.TrimSuffix(pat, "/**")), access, why, create)
		case strings.HasSuffix(pat, "/*"):
			p.file(filepath.Clean(strings.TrimSuffix(pat, "/*")), access, why, create)
		case strings.HasSuffix(pat, "*"):
			dir := filepath.Dir(strings.TrimSuffix(pat, "*"))
			p.notEnforced = append(p.notEnforced, why+": a name prefix, granted on its directory "+dir)
			p.file(dir, access, why, create)
		default:
			p.file(filepath.Clean(pat), access, why, create)
		}
	}
}

// writeRoots creates the missing directory of each fs.write "/**" or "/*"
// pattern (0755, as write_file would on its first write: the policy
// allows it), so the rule is on that directory rather than on its nearest
// existing ancestor, which could be all of /tmp.
func (p *plan) writeRoots(pats []string) {
	for _, pat := range pats {
		dir, ok := strings.CutSuffix(pat, "/**")
		if !ok {
			dir, ok = strings.CutSuffix(pat, "/*")
		}
		if !ok || !filepath.IsAbs(dir) {
			continue
		}
		p.ownDir(filepath.Clean(dir))
	}
}

// ownDir creates a directory that will be written in (kiln would, with
// the same mode, on its first write), so its grant is exact. The
// preflight plan (mkdir off) records it as planned instead.
func (p *plan) ownDir(dir string) {
	if !p.mkdir {
		if abs, err := filepath.Abs(dir); err == nil {
			if _, err := os.Stat(abs); err != nil {
				p.notEnforced = append(p.notEnforced, abs+" will be created at start-up")
				if p.planned == nil {
					p.planned = map[string]bool{}
				}
				p.planned[abs] = true
			}
		}
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.notEnforced = append(p.notEnforced, dir+": "+err.Error())
	}
}

// file adds a rule on path. A path that does not exist yet is granted on
// its nearest existing ancestor when the right creates it (create), and
// reported; otherwise it is left out (nothing there to read or run).
func (p *plan) file(path string, access uint64, why string, create bool) {
	abs, err := filepath.Abs(path)
	if err != nil {
		p.notEnforced = append(p.notEnforced, why+": "+err.Error())
		return
	}
	st, err := os.Stat(abs)
	if err != nil && p.planned[abs] {
		p.paths = append(p.paths, pathRule{path: abs, access: access, dir: true, why: why})
		return
	}
	if err != nil {
		if !create {
			p.notEnforced = append(p.notEnforced, why+": "+abs+" does not exist at start-up, not granted")
			return
		}
		anc := abs
		for {
			anc = filepath.Dir(anc)
			if st, err = os.Stat(anc); err == nil || anc == "/" {
				break
			}
		}
		if err != nil || !st.IsDir() {
			p.notEnforced = append(p.notEnforced, why+": no existing ancestor of "+abs)
			return
		}
		p.notEnforced = append(p.notEnforced, why+": "+abs+" does not exist at start-up, granted on "+anc)
		abs = anc
	}
	r := pathRule{path: abs, access: access, dir: st.IsDir(), why: why}
	if !r.dir {
		r.access &= fileRights
		if r.access == 0 {
			return
		}
	}
	p.paths = append(p.paths, r)
}

// system adds read-only system locations that exist (missing ones are
// not an issue: each system has some of them).
func (p *plan) system(paths []string, access uint64, why string) {
	for _, path := range paths {
		if _, err := os.Stat(path); err == nil {
			p.file(path, access, why, false)
		}
	}
}

// command grants execute on a child's program; a bare name is looked up
// in PATH as the child's start would.
func (p *plan) command(name, why string) {
	if !filepath.IsAbs(name) {
		found, err := lookPath(name)
		if err != nil {
			p.notEnforced = append(p.notEnforced, why+": "+name+" not found in PATH, not granted")
			return
		}
		name = found
	}
	p.file(name, rExec, why, false)
}

// lookPath finds a command as the child's start would (a bare name in
// PATH, a relative one from the working directory) without linking
// os/exec into every confined binary.
func lookPath(name string) (string, error) {
	if strings.Contains(name, "/") {
		return filepath.Abs(name)
	}
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if dir == "" {
			dir = "."
		}
		path := filepath.Join(dir, name)
		if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return filepath.Abs(path)
		}
	}
	return "", fmt.Errorf("%s: not found in PATH", name)
}

// url adds the TCP port of a URL or URL pattern. The port is bounded only
// when the authority is complete: "https://api.example.com/*" is 443,
// "http://h:8080/x" 8080, but "http://h:80*" or "*" may be any port.
func (p *plan) url(u, why string) {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		p.unbounded(why)
		return
	}
	auth, _, hasPath := strings.Cut(rest, "/")
	if !hasPath && strings.HasSuffix(auth, "*") {
		p.unbounded(why)
		return
	}
	if i := strings.LastIndex(auth, "@"); i >= 0 {
		auth = auth[i+1:]
	}
	_, port, err := splitPort(auth)
	switch {
	case err != nil:
		p.unbounded(why)
	case port != 0:
		p.addPort(&p.connect, port)
	case strings.EqualFold(scheme, "https"):
		p.addPort(&p.connect, 443)
	case strings.EqualFold(scheme, "http"):
		p.addPort(&p.connect, 80)
	default:
		p.unbounded(why)
	}
}

// otel adds the collector's port: the endpoint written, else the one the
// standard environment variables name, else the OTLP defaults.
func (p *plan) otel(endpoint string, getenv func(string) string) {
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if endpoint == "" {
			endpoint = getenv(v)
		}
	}
	if endpoint == "" {
		p.addPort(&p.connect, 4317)
		p.addPort(&p.connect, 4318)
		return
	}
	if !strings.Contains(endpoint, "://") {
		endpoint = "https://" + endpoint + "/" // a gRPC host:port
	}
	p.url(endpoint, "[logging.otel] endpoint")
}

func (p *plan) unbounded(why string) {
	if !p.anyConnect {
		p.anyConnect = true
	}
	p.notEnforced = append(p.notEnforced, "net.connect: "+why+" may reach any port, so TCP connect is not restricted")
}

func (p *plan) addPort(set *[]uint16, port uint16) {
	if !slices.Contains(*set, port) {
		*set = append(*set, port)
		slices.Sort(*set)
	}
}

// splitPort returns host and port of "host:port" ("[::1]:80"); port 0
// when there is none.
func splitPort(hostport string) (string, uint16, error) {
	i := strings.LastIndex(hostport, ":")
	if i < 0 || strings.HasSuffix(hostport, "]") {
		return hostport, 0, nil
	}
	n, err := strconv.ParseUint(hostport[i+1:], 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("port %q: %v", hostport[i+1:], err)
	}
	return hostport[:i], uint16(n), nil
}
