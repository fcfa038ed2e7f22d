package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/gen/deploy"
	"github.com/kilnworks/kiln/runtime/testtool"
)

// writeUnits renders the units of a sealed example with the binary copied
// into a fresh directory (systemd-analyze verify checks ExecStart exists).
func writeUnits(t *testing.T, name string) (*deploy.Spec, string, []deploy.File) {
	t.Helper()
	_, sp := spec(t, name)
	dir := t.TempDir()
	bin := filepath.Join(dir, sp.Name)
	data, err := os.ReadFile(sealed(t, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	files, err := deploy.Systemd(sp, bin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deploy.WriteFiles(dir, files); err != nil {
		t.Fatal(err)
	}
	return sp, dir, files
}

var exposure = regexp.MustCompile(`Overall exposure level for \S+: (\d+\.\d+)`)

// The units pass systemd-analyze verify, and the services score an
// exposure of 2.0 or lower in systemd-analyze security.
func TestSystemdAnalyze(t *testing.T) {
	sa := testtool.Command(t, "systemd-analyze")
	for _, name := range examples {
		t.Run(filepath.Base(name), func(t *testing.T) {
			sp, dir, files := writeUnits(t, name)
			for _, f := range files {
				unit := filepath.Join(dir, f.Name)
				out, err := exec.Command(sa, "verify", unit).CombinedOutput()
				if err != nil || len(strings.TrimSpace(string(out))) != 0 {
					t.Errorf("systemd-analyze verify %s: %v\n%s\n%s", f.Name, err, out, f.Data)
				}
				if !strings.HasSuffix(f.Name, ".service") {
					continue
				}
				out, _ = exec.Command(sa, "security", "--offline=yes", unit).CombinedOutput()
				m := exposure.FindSubmatch(out)
				if m == nil {
					t.Fatalf("systemd-analyze security %s: no exposure level in:\n%s", f.Name, out)
				}
				score, _ := strconv.ParseFloat(string(m[1]), 64)
				t.Logf("%s: exposure %.1f (mode %s)", f.Name, score, sp.Mode)
				if score > 2.0 {
					t.Errorf("%s: exposure %.1f, want 2.0 or lower:\n%s", f.Name, score, out)
				}
			}
		})
	}
}

// The unit grants what the needs say and nothing more.
func TestSystemdFromNeeds(t *testing.T) {
	_, hello := spec(t, "hello")
	files, err := deploy.Systemd(hello, deploy.DefaultExecPath(hello))
	if err != nil {
		t.Fatal(err)
	}
	unit := string(files[0].Data)
	for _, want := range []string{"\nPrivateNetwork=yes\n", "\nRestrictAddressFamilies=AF_UNIX\n", "\nIPAddressDeny=any\n",
		"\nDynamicUser=yes\n", "\nCapabilityBoundingSet=\n", "\nNoNewPrivileges=yes\n", "\nProtectSystem=strict\n",
		"\nSystemCallFilter=@system-service landlock_create_ruleset landlock_add_rule landlock_restrict_self\n", "\nExecReload=/bin/kill -HUP $MAINPID\n"} {
		if !strings.Contains(unit, want) {
			t.Errorf("hello.service lacks %q", strings.TrimSpace(want))
		}
	}
	if strings.Contains(unit, "AF_INET") || strings.Contains(unit, "ReadWritePaths") || strings.Contains(unit, "StateDirectory") {
		t.Errorf("hello.service grants more than its needs:\n%s", unit)
	}

	_, vault := spec(t, "testdata/vault")
	files, err = deploy.Systemd(vault, deploy.DefaultExecPath(vault))
	if err != nil {
		t.Fatal(err)
	}
	unit = string(files[0].Data)
	for _, want := range []string{"\nReadWritePaths=/srv/vault-out\n", "\nReadOnlyPaths=/srv/vault-config\n",
		"\nLoadCredential=api-token:/etc/vault-agent/token\n", "\nBindReadOnlyPaths=%d/api-token:/etc/vault-agent/token\n",
		"\nRestrictAddressFamilies=AF_UNIX AF_INET AF_INET6\n", "\nEnvironmentFile=/etc/kiln/vault.env\n"} {
		if !strings.Contains(unit, want) {
			t.Errorf("vault.service lacks %q", strings.TrimSpace(want))
		}
	}
	if strings.Contains(unit, "IPAddressDeny") || strings.Contains(unit, "PrivateNetwork") {
		t.Errorf("vault.service cuts the network it needs")
	}
}
