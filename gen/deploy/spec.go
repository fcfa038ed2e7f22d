package deploy

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/kilnworks/kiln/runtime/needs"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Run modes of a deployment.
const (
	ModeServe = "serve" // routes or long-lived triggers: a service
	ModeCron  = "cron"  // cron triggers only: scheduled one-shot runs
	ModeOnce  = "once"  // no trigger: a one-shot job
)

// Fixed choices every target shares.
const (
	// Port is the container and unit listen port in serve mode.
	Port = 8080
	// DrainSecs is passed as --drain-timeout-secs; the platform's grace
	// period is GraceSecs, longer, so in-flight runs are answered before
	// the process is killed.
	DrainSecs = 30
	GraceSecs = DrainSecs + 15
	// StateDir is where a pod mounts its state volume; a systemd unit
	// uses StateDirectory=kiln/NAME, /var/lib/kiln/NAME.
	StateDir = "/var/lib/kiln"
	// UID is the non-root numeric user of the image and the pod.
	UID = 65532
)

// Spec is everything the templates need, derived once from a Seal.
type Spec struct {
	Name           string // a DNS-1123 label from the workflow name
	Workflow       string
	ManifestDigest string
	BinarySHA256   string
	KilnVersion    string
	Mode           string
	Schedules      []Schedule // ModeCron
	Port           int
	DrainSecs      int
	GraceSecs      int
	UID            int
	// Durable is set when the workflow needs a state directory
	// (pause_for_approval, idempotency_key).
	Durable bool
	// Secrets are the environment-variable secrets (named, never valued).
	Secrets []Secret
	// FileSecrets are [[secrets]] entries read from a file.
	FileSecrets []FileSecret
	// ReadPaths and WritePaths are the filesystem needs (file secrets
	// excluded), sorted.
	ReadPaths  []string
	WritePaths []string
	// Hosts are the network needs with the TCP ports they are reached on.
	Hosts []Host
	// Ports is the sorted union of Hosts' ports.
	Ports []int
	// TLS is set when the binary makes TLS connections (a host on 443 or
	// another https port), so the image carries CA certificates.
	TLS bool
	// Listens is set in serve mode with HTTP routes.
	Listens bool
}

// Schedule is one cron trigger translated for each target.
type Schedule struct {
	Source     string // the workflow's expression
	StartNode  string
	Cron       string // 5-field, for a Kubernetes CronJob
	TimeZone   string // IANA zone, "" for the node's local time
	OnCalendar string // systemd calendar expression
}

// Secret is a secret need read from an environment variable.
type Secret struct {
	Key      string
	Optional bool
}

// FileSecret is a [[secrets]] entry with source "file".
type FileSecret struct {
	Name string // credential name: the secret's name, sanitised
	Path string
}

// Host is a network need.
type Host struct {
	Name  string
	Ports []int
}

// Derive computes the Spec of a sealed binary. It fails on anything the
// targets cannot express rather than emit a looser deployment.
func Derive(s *Seal) (*Spec, error) {
	wf := s.Workflow
	sp := &Spec{
		Name:           dnsLabel(s.Manifest.Workflow.Name),
		Workflow:       s.Manifest.Workflow.Name,
		ManifestDigest: s.ManifestDigest,
		BinarySHA256:   s.BinarySHA256,
		KilnVersion:    s.Manifest.KilnVersion,
		Port:           Port,
		DrainSecs:      DrainSecs,
		GraceSecs:      GraceSecs,
		UID:            UID,
	}
	if sp.Name == "" {
		return nil, fmt.Errorf("workflow name %q gives no usable DNS label", s.Manifest.Workflow.Name)
	}
	sp.Mode = mode(wf)
	if sp.Mode == ModeCron {
		for i, t := range wf.Triggers {
			sc, err := translateCron(t.Schedule)
			if err != nil {
				return nil, fmt.Errorf("workflow.toml: triggers[%d].schedule %q: %v", i, t.Schedule, err)
			}
			sc.StartNode = t.StartNode
			sp.Schedules = append(sp.Schedules, sc)
		}
	}
	sp.Listens = len(wf.HTTPRoutes) > 0
	sp.Durable = slices.Contains(s.Manifest.NodeKinds, "pause_for_approval")
	for _, r := range wf.HTTPRoutes {
		if r.IdempotencyKey != "" {
			sp.Durable = true
		}
	}

	fileSecret := map[string]string{} // path -> name
	for _, sec := range wf.Secrets {
		if sec.Source == "file" {
			fileSecret[sec.Path] = sec.Name
		}
	}
	hostPorts := policyPorts(wf)
	for _, n := range s.Needs.Needs {
		switch n.Kind {
		case needs.KindSecret:
			sp.Secrets = append(sp.Secrets, Secret{Key: n.Key, Optional: n.Optional})
		case needs.KindNetwork:
			h := strings.ToLower(n.Host)
			ports := hostPorts[h]
			if len(ports) == 0 {
				ports = []int{443}
			}
			sp.Hosts = append(sp.Hosts, Host{Name: h, Ports: ports})
		case needs.KindFilesystem:
			if !path.IsAbs(n.Path) || path.Clean(n.Path) != n.Path {
				return nil, fmt.Errorf("filesystem need %q is not a clean absolute path; a deployment cannot mount it", n.Path)
			}
			if name, ok := fileSecret[n.Path]; ok && n.Mode == "ro" {
				sp.FileSecrets = append(sp.FileSecrets, FileSecret{Name: credName(name), Path: n.Path})
				continue
			}
			if n.Mode == "rw" {
				sp.WritePaths = append(sp.WritePaths, n.Path)
			} else {
				sp.ReadPaths = append(sp.ReadPaths, n.Path)
			}
		}
	}
	sort.Strings(sp.ReadPaths)
	sort.Strings(sp.WritePaths)
	sort.Slice(sp.Hosts, func(i, j int) bool { return sp.Hosts[i].Name < sp.Hosts[j].Name })
	sort.Slice(sp.FileSecrets, func(i, j int) bool { return sp.FileSecrets[i].Path < sp.FileSecrets[j].Path })
	seen := map[int]bool{}
	for _, h := range sp.Hosts {
		for _, p := range h.Ports {
			if !seen[p] {
				seen[p] = true
				sp.Ports = append(sp.Ports, p)
			}
			if p != 80 {
				sp.TLS = true
			}
		}
	}
	sort.Ints(sp.Ports)
	if err := sp.check(); err != nil {
		return nil, err
	}
	return sp, nil
}

var (
	envName  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	safePath = regexp.MustCompile(`^/[A-Za-z0-9_./@+-]*$`)
	zoneName = regexp.MustCompile(`^[A-Za-z0-9_+/-]+$`)
)

// check refuses values the targets would have to escape: the templates
// quote everything, but a secret key, path or zone that needs quoting is
// not one a workflow can have declared, so it is refused rather than
// carried into a unit file or a manifest.
func (sp *Spec) check() error {
	if sp.Name == "" || dnsLabel(sp.Name) != sp.Name {
		return fmt.Errorf("name %q is not a DNS label", sp.Name)
	}
	for _, s := range sp.Secrets {
		if !envName.MatchString(s.Key) {
			return fmt.Errorf("secret need %q is not an environment variable name", s.Key)
		}
	}
	var paths []string
	paths = append(paths, sp.ReadPaths...)
	paths = append(paths, sp.WritePaths...)
	for _, f := range sp.FileSecrets {
		if credName(f.Name) != f.Name {
			return fmt.Errorf("file secret name %q has characters a credential name cannot hold", f.Name)
		}
		paths = append(paths, f.Path)
	}
	for _, p := range paths {
		if !safePath.MatchString(p) || path.Clean(p) != p {
			return fmt.Errorf("filesystem need %q: only clean absolute paths of letters, digits and _ . / @ + - can be mounted", p)
		}
	}
	for _, sc := range sp.Schedules {
		if sc.TimeZone != "" && !zoneName.MatchString(sc.TimeZone) {
			return fmt.Errorf("cron time zone %q is not a zone name", sc.TimeZone)
		}
	}
	for _, h := range sp.Hosts {
		if !hostName.MatchString(h.Name) {
			return fmt.Errorf("network need %q is not a host name", h.Name)
		}
	}
	return nil
}

var hostName = regexp.MustCompile(`^[a-z0-9:]([a-z0-9.:-]*[a-z0-9])?$`)

// mode: routes or any long-lived trigger other than cron serve; cron
// alone becomes scheduled one-shot runs; nothing at all is one-shot.
func mode(wf *workflow.Workflow) string {
	if len(wf.HTTPRoutes) > 0 {
		return ModeServe
	}
	if len(wf.Triggers) == 0 {
		return ModeOnce
	}
	for _, t := range wf.Triggers {
		if t.Type != "cron" {
			return ModeServe
		}
	}
	return ModeCron
}

// runArgs are the binary's flags and mode word (flags first), with the
// state directory at stateDir and, for a cron trigger, its start node.
func runArgs(sp *Spec, stateDir, start string) []string {
	var a []string
	if sp.Durable {
		a = append(a, "--state-dir", stateDir)
	}
	switch sp.Mode {
	case ModeServe:
		if sp.Listens {
			a = append(a, "--bind", ":"+strconv.Itoa(sp.Port))
		}
		a = append(a, "--drain-timeout-secs", strconv.Itoa(sp.DrainSecs), "serve")
	default:
		if start != "" {
			a = append(a, "--start", start)
		}
		a = append(a, "once")
	}
	return a
}

// policyPorts maps each host the root workflow's [policy.http] urls name
// to the ports those URLs use (scheme default or explicit port).
func policyPorts(wf *workflow.Workflow) map[string][]int {
	out := map[string][]int{}
	if wf.Policy == nil || wf.Policy.HTTP == nil {
		return out
	}
	for _, pat := range wf.Policy.HTTP.URLs {
		u, err := url.Parse(strings.TrimRight(pat, "*"))
		if err != nil || u.Hostname() == "" || strings.Contains(u.Host, "*") {
			continue
		}
		port := 443
		if u.Scheme == "http" {
			port = 80
		}
		if p, err := strconv.Atoi(u.Port()); err == nil && p > 0 && p < 65536 {
			port = p
		}
		h := strings.ToLower(u.Hostname())
		if !slices.Contains(out[h], port) {
			out[h] = append(out[h], port)
			sort.Ints(out[h])
		}
	}
	return out
}

var notLabel = regexp.MustCompile(`[^a-z0-9-]+`)

// dnsLabel turns a workflow name into a Kubernetes object name and
// systemd unit name: lower case, [a-z0-9-], at most 52 characters (room
// for suffixes such as -secrets within the 63 a label allows).
func dnsLabel(name string) string {
	s := notLabel.ReplaceAllString(strings.ToLower(name), "-")
	if len(s) > 52 {
		s = s[:52]
	}
	return strings.Trim(s, "-")
}

var notCred = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// credName is a secret's name as a systemd credential and a Kubernetes
// Secret key.
func credName(name string) string { return notCred.ReplaceAllString(name, "_") }
