package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"strings"
	"text/template"

	"github.com/kilnworks/kiln/templates"
)

// File is one generated artefact: a name inside the output directory and
// its bytes.
type File struct {
	Name string
	Data []byte
}

var funcs = template.FuncMap{
	"q":      quote,
	"sdq":    sdQuote,
	"indent": indent,
	"join":   strings.Join,
}

// indent prefixes every line of s with n spaces (s starts with a newline,
// as a rendered sub-template does, which is dropped).
func indent(n int, s string) string {
	pad := strings.Repeat(" ", n)
	lines := strings.Split(strings.TrimPrefix(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = pad + l
		}
	}
	return strings.Join(lines, "\n")
}

// quote renders s as a JSON string: valid YAML whatever s holds.
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// sdQuote renders one systemd unit-file word: as is when it holds only
// safe characters, else double-quoted with C escapes; % is doubled so no
// specifier is expanded.
func sdQuote(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._:=@+-,", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	q := strconv.Quote(strings.ReplaceAll(s, "%", "%%"))
	return strings.ReplaceAll(q, "$", "$$")
}

func render(name string, data any) ([]byte, error) {
	return renderPart(name, name, data)
}

// renderPart executes the template part (a file or one of its defines)
// of the template file name.
func renderPart(name, part string, data any) ([]byte, error) {
	t, err := template.New(name).Funcs(funcs).Option("missingkey=error").ParseFS(templates.Deploy, "deploy/"+name)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, part, data); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// k8sView is the data of k8s.yaml.tmpl.
type k8sView struct {
	*Spec
	Image    string
	RunArgs  []string
	Mounts   []mount
	Volumes  []volume
	HostList string
	Jobs     []k8sJob
	// PodYAML is the rendered pod spec of this workload.
	PodYAML string
}

type k8sJob struct {
	k8sView
	JobName  string
	Schedule Schedule
}

type mount struct {
	Volume, Path, SubPath string
	ReadOnly              bool
}

type volume struct {
	Name, Claim, Secret string
}

// K8s renders the Kubernetes manifests (and, with cilium, a
// CiliumNetworkPolicy) for image.
func K8s(sp *Spec, image string, cilium bool) ([]File, error) {
	if err := sp.check(); err != nil {
		return nil, err
	}
	v := k8sView{Spec: sp, Image: image, RunArgs: runArgs(sp, StateDir, ""), HostList: hostList(sp)}
	for i, p := range sp.WritePaths {
		name := fmt.Sprintf("write-%d", i)
		v.Volumes = append(v.Volumes, volume{Name: name})
		v.Mounts = append(v.Mounts, mount{Volume: name, Path: p})
	}
	if sp.Durable {
		v.Volumes = append(v.Volumes, volume{Name: "state", Claim: sp.Name + "-state"})
		v.Mounts = append(v.Mounts, mount{Volume: "state", Path: StateDir})
	}
	if len(sp.FileSecrets) > 0 {
		v.Volumes = append(v.Volumes, volume{Name: "secret-files", Secret: sp.Name + "-secret-files"})
		for _, fs := range sp.FileSecrets {
			v.Mounts = append(v.Mounts, mount{Volume: "secret-files", Path: fs.Path, SubPath: fs.Name, ReadOnly: true})
		}
	}
	for i, sc := range sp.Schedules {
		j := k8sJob{k8sView: v, JobName: sp.Name, Schedule: sc}
		j.RunArgs = runArgs(sp, StateDir, sc.StartNode)
		if len(sp.Schedules) > 1 {
			j.JobName = fmt.Sprintf("%s-%d", sp.Name, i+1)
		}
		pod, err := renderPart("k8s.yaml.tmpl", "pod", j.k8sView)
		if err != nil {
			return nil, err
		}
		j.PodYAML = string(pod)
		v.Jobs = append(v.Jobs, j)
	}
	pod, err := renderPart("k8s.yaml.tmpl", "pod", v)
	if err != nil {
		return nil, err
	}
	v.PodYAML = string(pod)
	data, err := render("k8s.yaml.tmpl", v)
	if err != nil {
		return nil, err
	}
	out := []File{{Name: sp.Name + ".k8s.yaml", Data: data}}
	if cilium {
		data, err := render("cilium.yaml.tmpl", v)
		if err != nil {
			return nil, err
		}
		out = append(out, File{Name: sp.Name + ".cilium.yaml", Data: data})
	}
	return out, nil
}

func hostList(sp *Spec) string {
	var hs []string
	for _, h := range sp.Hosts {
		hs = append(hs, h.Name)
	}
	return strings.Join(hs, ",")
}

// sdView is the data of the systemd templates.
type sdView struct {
	*Spec
	UnitName        string
	ExecPath        string
	RunArgs         []string
	Network         bool
	HostList        string
	StateDirName    string
	EnvFile         string
	SecretsRequired bool
	// SDWritePaths and SDReadPaths are the filesystem needs outside
	// /tmp and /var/tmp; TmpPaths those inside, which PrivateTmp already
	// gives the unit as private, writable directories.
	SDWritePaths, SDReadPaths, TmpPaths []string
	Schedule                            Schedule
}

func inTmp(p string) bool {
	return p == "/tmp" || p == "/var/tmp" || strings.HasPrefix(p, "/tmp/") || strings.HasPrefix(p, "/var/tmp/")
}

// DefaultExecPath is where the systemd unit expects the binary.
func DefaultExecPath(sp *Spec) string { return "/usr/local/bin/" + sp.Name }

// Systemd renders the service unit (one per cron trigger, each with its
// timer, for a cron-only workflow) running the binary at execPath.
func Systemd(sp *Spec, execPath string) ([]File, error) {
	if err := sp.check(); err != nil {
		return nil, err
	}
	if !safePath.MatchString(execPath) || path.Clean(execPath) != execPath {
		return nil, fmt.Errorf("--exec-path %q must be a clean absolute path of letters, digits and _ . / @ + -", execPath)
	}
	stateDir := "/var/lib/kiln/" + sp.Name
	v := sdView{Spec: sp, UnitName: sp.Name, ExecPath: execPath, RunArgs: runArgs(sp, stateDir, ""),
		Network: sp.Listens || len(sp.Hosts) > 0, HostList: hostList(sp),
		StateDirName: "kiln/" + sp.Name, EnvFile: "/etc/kiln/" + sp.Name + ".env"}
	for _, p := range sp.WritePaths {
		if inTmp(p) {
			v.TmpPaths = append(v.TmpPaths, p)
		} else {
			v.SDWritePaths = append(v.SDWritePaths, p)
		}
	}
	for _, p := range sp.ReadPaths {
		if inTmp(p) {
			v.TmpPaths = append(v.TmpPaths, p)
		} else {
			v.SDReadPaths = append(v.SDReadPaths, p)
		}
	}
	for _, s := range sp.Secrets {
		if !s.Optional {
			v.SecretsRequired = true
		}
	}
	if sp.Mode != ModeCron {
		data, err := render("systemd.service.tmpl", v)
		if err != nil {
			return nil, err
		}
		return []File{{Name: sp.Name + ".service", Data: data}}, nil
	}
	var out []File
	for i, sc := range sp.Schedules {
		u := v
		u.Schedule, u.RunArgs = sc, runArgs(sp, stateDir, sc.StartNode)
		if len(sp.Schedules) > 1 {
			u.UnitName = fmt.Sprintf("%s-%d", sp.Name, i+1)
		}
		svc, err := render("systemd.service.tmpl", u)
		if err != nil {
			return nil, err
		}
		tmr, err := render("systemd.timer.tmpl", u)
		if err != nil {
			return nil, err
		}
		out = append(out, File{Name: u.UnitName + ".service", Data: svc}, File{Name: u.UnitName + ".timer", Data: tmr})
	}
	return out, nil
}
