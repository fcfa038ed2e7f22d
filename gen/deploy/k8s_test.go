package deploy_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kilnworks/kiln/gen/deploy"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"
)

// objects holds the decoded objects of one k8s.yaml file.
type objects struct {
	deployments []appsv1.Deployment
	services    []corev1.Service
	jobs        []batchv1.Job
	cronJobs    []batchv1.CronJob
	pvcs        []corev1.PersistentVolumeClaim
	netpols     []networkingv1.NetworkPolicy
}

// decodeStrict decodes every document of a manifest file into its
// k8s.io/api type; an unknown field or kind fails the test.
func decodeStrict(t *testing.T, data []byte) objects {
	t.Helper()
	var o objects
	for i, doc := range bytes.Split(data, []byte("\n---\n")) {
		if i == 0 {
			continue // the header comment before the first document
		}
		var meta struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		var err error
		switch meta.Kind {
		case "Deployment":
			err = add(doc, &o.deployments)
		case "Service":
			err = add(doc, &o.services)
		case "Job":
			err = add(doc, &o.jobs)
		case "CronJob":
			err = add(doc, &o.cronJobs)
		case "PersistentVolumeClaim":
			err = add(doc, &o.pvcs)
		case "NetworkPolicy":
			err = add(doc, &o.netpols)
		default:
			err = fmt.Errorf("unexpected kind %q", meta.Kind)
		}
		if err != nil {
			t.Fatalf("document %d (%s): %v\n%s", i, meta.Kind, err, doc)
		}
	}
	return o
}

func add[T any](doc []byte, to *[]T) error {
	var v T
	if err := yaml.UnmarshalStrict(doc, &v); err != nil {
		return err
	}
	*to = append(*to, v)
	return nil
}

func k8sFor(t *testing.T, name string) (*deploy.Spec, objects, []byte) {
	t.Helper()
	_, sp := spec(t, name)
	files, err := deploy.K8s(sp, "registry.example/"+sp.Name+"@sha256:"+strings.Repeat("a", 64), true)
	if err != nil {
		t.Fatal(err)
	}
	return sp, decodeStrict(t, files[0].Data), files[1].Data
}

// hardened checks the pod and container security contexts every object
// must carry.
func hardened(t *testing.T, pod corev1.PodSpec) {
	t.Helper()
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("service account token is mounted")
	}
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext not hardened: %+v", psc)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Privileged == nil || *sc.Privileged ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("container securityContext not hardened: %+v", sc)
	}
	for _, e := range c.Env {
		if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			t.Errorf("env %s is not a Secret reference: %+v", e.Name, e)
		}
	}
}

func TestK8sServe(t *testing.T) {
	sp, o, _ := k8sFor(t, "webhook")
	if len(o.deployments) != 1 || len(o.services) != 1 || len(o.pvcs) != 1 || len(o.netpols) != 1 || len(o.jobs)+len(o.cronJobs) != 0 {
		t.Fatalf("objects: %d deployments, %d services, %d pvcs, %d netpols, %d jobs, %d cronjobs",
			len(o.deployments), len(o.services), len(o.pvcs), len(o.netpols), len(o.jobs), len(o.cronJobs))
	}
	d := o.deployments[0]
	if d.Annotations[deploy.AnnotationManifestDigest] == "" {
		t.Error("no manifest digest annotation")
	}
	pod := d.Spec.Template.Spec
	hardened(t, pod)
	if pod.TerminationGracePeriodSeconds == nil || *pod.TerminationGracePeriodSeconds <= int64(sp.DrainSecs) {
		t.Errorf("terminationGracePeriodSeconds %v not above the drain timeout %d", pod.TerminationGracePeriodSeconds, sp.DrainSecs)
	}
	c := pod.Containers[0]
	if !slices.Contains(c.Args, fmt.Sprint(sp.DrainSecs)) || c.Args[len(c.Args)-1] != "serve" {
		t.Errorf("args %v", c.Args)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" ||
		c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("probes: readiness %+v liveness %+v", c.ReadinessProbe, c.LivenessProbe)
	}
	if len(c.Env) != 1 || c.Env[0].Name != "GITHUB_WEBHOOK_SECRET" || c.Env[0].ValueFrom.SecretKeyRef.Key != "GITHUB_WEBHOOK_SECRET" {
		t.Errorf("env %+v", c.Env)
	}
	// The state directory is the PVC (idempotency_key needs it).
	var claim string
	for _, v := range pod.Volumes {
		if v.PersistentVolumeClaim != nil {
			claim = v.PersistentVolumeClaim.ClaimName
		}
	}
	if claim != o.pvcs[0].Name || !slices.Contains(c.Args, deploy.StateDir) {
		t.Errorf("state volume: claim %q, pvc %q, args %v", claim, o.pvcs[0].Name, c.Args)
	}
	// Ingress only to the route port; no egress at all (no network need).
	np := o.netpols[0].Spec
	if !slices.Equal(np.PolicyTypes, []networkingv1.PolicyType{"Ingress", "Egress"}) {
		t.Errorf("policyTypes %v", np.PolicyTypes)
	}
	if len(np.Ingress) != 1 || len(np.Ingress[0].Ports) != 1 || np.Ingress[0].Ports[0].Port.IntValue() != deploy.Port || len(np.Ingress[0].From) != 0 {
		t.Errorf("ingress %+v", np.Ingress)
	}
	if len(np.Egress) != 0 {
		t.Errorf("egress %+v, want none", np.Egress)
	}
}

func TestK8sJobAndCronJob(t *testing.T) {
	_, hello, _ := k8sFor(t, "hello")
	if len(hello.jobs) != 1 || len(hello.deployments)+len(hello.cronJobs)+len(hello.services)+len(hello.pvcs) != 0 {
		t.Fatalf("hello: want exactly one Job: %+v", hello)
	}
	pod := hello.jobs[0].Spec.Template.Spec
	hardened(t, pod)
	if pod.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy %q", pod.RestartPolicy)
	}
	c := pod.Containers[0]
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/tmp/kiln-hello" || pod.Volumes[0].EmptyDir == nil {
		t.Errorf("write path volume: %+v %+v", c.VolumeMounts, pod.Volumes)
	}
	if np := hello.netpols[0].Spec; len(np.Ingress) != 0 || len(np.Egress) != 0 || len(np.PolicyTypes) != 2 {
		t.Errorf("hello NetworkPolicy must deny everything: %+v", np)
	}

	_, cp, cilium := k8sFor(t, "cron-poller")
	if len(cp.cronJobs) != 1 || len(cp.deployments)+len(cp.jobs) != 0 {
		t.Fatalf("cron-poller: want exactly one CronJob: %+v", cp)
	}
	cj := cp.cronJobs[0]
	if cj.Spec.Schedule != "*/5 * * * *" || cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		t.Errorf("schedule %q, concurrency %q", cj.Spec.Schedule, cj.Spec.ConcurrencyPolicy)
	}
	cpod := cj.Spec.JobTemplate.Spec.Template.Spec
	hardened(t, cpod)
	if args := cpod.Containers[0].Args; !slices.Equal(args, []string{"--start", "poll", "once"}) {
		t.Errorf("args %v", args)
	}
	np := cp.netpols[0]
	if np.Annotations["kiln.dev/egress-hosts"] != "status.example.com" {
		t.Errorf("egress hosts annotation %q", np.Annotations["kiln.dev/egress-hosts"])
	}
	var ports []string
	for _, r := range np.Spec.Egress {
		for _, p := range r.Ports {
			ports = append(ports, fmt.Sprintf("%s/%d", *p.Protocol, p.Port.IntValue()))
		}
	}
	if want := []string{"UDP/53", "TCP/53", "TCP/443"}; !slices.Equal(ports, want) || len(np.Spec.Egress) != 2 {
		t.Fatalf("egress ports %v, want %v in two rules", ports, want)
	}
	// DNS only to kube-dns; the hosts' ports never to link-local
	// addresses (cloud metadata).
	dns := np.Spec.Egress[0].To
	if len(dns) != 1 || dns[0].PodSelector == nil || dns[0].PodSelector.MatchLabels["k8s-app"] != "kube-dns" ||
		dns[0].NamespaceSelector == nil || dns[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "kube-system" || dns[0].IPBlock != nil {
		t.Errorf("DNS egress peers %+v", dns)
	}
	var blocks []string
	for _, peer := range np.Spec.Egress[1].To {
		if peer.IPBlock == nil || peer.PodSelector != nil || peer.NamespaceSelector != nil {
			t.Fatalf("host egress peer %+v", peer)
		}
		blocks = append(blocks, peer.IPBlock.CIDR+" except "+strings.Join(peer.IPBlock.Except, ","))
	}
	if want := []string{"0.0.0.0/0 except 169.254.0.0/16", "::/0 except fe80::/10"}; !slices.Equal(blocks, want) {
		t.Errorf("host egress %v, want %v", blocks, want)
	}
	if len(np.Spec.Ingress) != 0 {
		t.Errorf("ingress %+v, want none", np.Spec.Ingress)
	}
	// The Cilium policy names the host.
	var cnp struct {
		Spec struct {
			Egress []struct {
				ToFQDNs []struct {
					MatchName string `json:"matchName"`
				} `json:"toFQDNs"`
			} `json:"egress"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(bytes.SplitN(cilium, []byte("\n---\n"), 2)[1], &cnp); err != nil {
		t.Fatal(err)
	}
	var fqdns []string
	for _, r := range cnp.Spec.Egress {
		for _, f := range r.ToFQDNs {
			fqdns = append(fqdns, f.MatchName)
		}
	}
	if !slices.Equal(fqdns, []string{"status.example.com"}) {
		t.Errorf("toFQDNs %v", fqdns)
	}
}

func TestK8sVolumesAndPorts(t *testing.T) {
	_, o, _ := k8sFor(t, "testdata/vault")
	pod := o.jobs[0].Spec.Template.Spec
	hardened(t, pod)
	c := pod.Containers[0]
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	if m, ok := mounts["/srv/vault-out"]; !ok || m.ReadOnly {
		t.Errorf("write path mount %+v", m)
	}
	if m, ok := mounts["/etc/vault-agent/token"]; !ok || !m.ReadOnly || m.SubPath != "api-token" {
		t.Errorf("file secret mount %+v", m)
	}
	if got := o.jobs[0].Annotations["kiln.dev/read-paths"]; got != "/srv/vault-config" {
		t.Errorf("read-paths annotation %q", got)
	}
	if len(c.Env) != 1 || c.Env[0].Name != "PLAIN_KEY" {
		t.Errorf("env %+v", c.Env)
	}
	var ports []int
	for _, r := range o.netpols[0].Spec.Egress {
		for _, p := range r.Ports {
			if p.Port.IntValue() != 53 {
				ports = append(ports, p.Port.IntValue())
			}
		}
	}
	if !slices.Equal(ports, []int{80, 8443}) {
		t.Errorf("egress ports %v, want [80 8443]", ports)
	}
}

// The sealed binary accepts the arguments the Deployment gives it: run
// with them (the listen address moved to loopback), it becomes ready and
// drains on SIGTERM.
func TestK8sArgsRunTheBinary(t *testing.T) {
	_, o, _ := k8sFor(t, "webhook")
	args := slices.Clone(o.deployments[0].Spec.Template.Spec.Containers[0].Args)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	for i := range args {
		switch args[i] {
		case fmt.Sprintf(":%d", deploy.Port):
			args[i] = addr
		case deploy.StateDir:
			args[i] = t.TempDir()
		}
	}
	cmd := exec.Command(sealed(t, "webhook"), args...)
	cmd.Env = append(os.Environ(), "GITHUB_WEBHOOK_SECRET=test-secret")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	ready := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && !ready; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			ready = resp.StatusCode == http.StatusOK
			resp.Body.Close()
		}
	}
	if !ready {
		t.Fatalf("webhook %v never became ready:\n%s", args, stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		done <- err
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(time.Duration(deploy.GraceSecs) * time.Second):
		t.Fatalf("still running %ds after SIGTERM", deploy.GraceSecs)
	}
}
