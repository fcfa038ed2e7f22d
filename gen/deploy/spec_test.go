package deploy

import (
	"strings"
	"testing"
)

// Values that would need escaping in a unit file or a manifest (a line
// break that starts a new directive, a quote, a colon that splits a
// LoadCredential) are refused by both targets, not escaped.
func TestSpecRefusesUnsafeValues(t *testing.T) {
	valid := func() *Spec {
		return &Spec{Name: "ok", Workflow: "ok", ManifestDigest: "sha256:" + strings.Repeat("0", 64), KilnVersion: "devel",
			Mode: ModeOnce, Port: Port, DrainSecs: DrainSecs, GraceSecs: GraceSecs, UID: UID,
			Secrets:     []Secret{{Key: "TOKEN"}},
			WritePaths:  []string{"/srv/out"},
			FileSecrets: []FileSecret{{Name: "key", Path: "/etc/app/key"}},
			Hosts:       []Host{{Name: "api.example.com", Ports: []int{443}}}}
	}
	for _, c := range []struct {
		name string
		edit func(*Spec)
	}{
		{"secret key with a line break", func(sp *Spec) { sp.Secrets[0].Key = "X\nExecStartPre=/bin/sh" }},
		{"write path with a line break", func(sp *Spec) { sp.WritePaths[0] = "/srv/out\nReadWritePaths=/" }},
		{"write path with a space", func(sp *Spec) { sp.WritePaths[0] = "/srv/my out" }},
		{"unclean path", func(sp *Spec) { sp.WritePaths[0] = "/srv/../etc" }},
		{"file secret path with a colon", func(sp *Spec) { sp.FileSecrets[0].Path = "/etc/a:/etc/shadow" }},
		{"file secret name with a slash", func(sp *Spec) { sp.FileSecrets[0].Name = "../key" }},
		{"host with a quote", func(sp *Spec) { sp.Hosts[0].Name = `a"b` }},
		{"time zone with a line break", func(sp *Spec) {
			sp.Mode = ModeCron
			sp.Schedules = []Schedule{{Cron: "0 6 * * *", TimeZone: "UTC\nOnCalendar=minutely", OnCalendar: "*-*-* 06:00:00", StartNode: "s"}}
		}},
		{"name that is not a label", func(sp *Spec) { sp.Name = "Ok Name" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := K8s(valid(), "ok@sha256:x", true); err != nil {
				t.Fatalf("valid spec refused: %v", err)
			}
			if _, err := Systemd(valid(), "/usr/local/bin/ok"); err != nil {
				t.Fatalf("valid spec refused: %v", err)
			}
			sp := valid()
			c.edit(sp)
			if _, err := K8s(sp, "ok@sha256:x", true); err == nil {
				t.Error("k8s accepted it")
			}
			if _, err := Systemd(sp, "/usr/local/bin/ok"); err == nil {
				t.Error("systemd accepted it")
			}
		})
	}
	if _, err := Systemd(valid(), "/usr/local/bin/ok\nExecStartPre=/bin/sh"); err == nil {
		t.Error("an --exec-path with a line break was accepted")
	}
}
