package gen_test

import (
	"bufio"
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kilnworks/kiln/gen"
)

// The schema family links santhosh-tekuri/jsonschema, which compiles its
// meta-schemas in its package init at every start of a binary that links
// it; only binaries whose workflow declares a schema may pay that.
const (
	jsonschemaModule = "github.com/santhosh-tekuri/jsonschema/v5"
	schemaFamily     = "github.com/kilnworks/kiln/capabilities/schema"
)

// schemaServe is a one-route serve workflow; route is added to its route.
func schemaServe(route string) string {
	return `name = "schema-serve"

[[start_nodes]]
name = "main"
source = "http"

[[nodes]]
id = "ok"
type = "respond"
input_from = "trigger"
body_template = '{"ok":true,"event":"{{event}}"}'

[[http_routes]]
method = "POST"
path = "/hook"
start_node = "main"
` + route
}

const eventSchema = `{"type": "object", "required": ["event"], "properties": {"event": {"type": "string"}, "n": {"type": "integer"}}}`

// schemaInfer is a one-shot llm_infer workflow; node is added to its node.
func schemaInfer(node string) string {
	return `name = "schema-infer"

[[nodes]]
id = "ask"
type = "llm_infer"
backend = "default"
prompt = "hi"
` + node
}

// writeSchemaWorkflow writes src and schemas/in.json into a fresh
// directory and returns the workflow's path.
func writeSchemaWorkflow(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "schemas", "in.json"), []byte(eventSchema))
	path := filepath.Join(dir, "workflow.toml")
	writeFile(t, path, []byte(src))
	return path
}

// TestSchemaFamilyLinkedOnlyWhenDeclared: a route or an llm_infer node
// links the JSON Schema library only when it declares a schema file
// (output_schema = "inline" is any JSON: nothing to compile).
func TestSchemaFamilyLinkedOnlyWhenDeclared(t *testing.T) {
	for _, c := range []struct {
		name, src string
		linked    bool
	}{
		{"route without input_schema", schemaServe(""), false},
		{"route with input_schema", schemaServe(`input_schema = "schemas/in.json"` + "\n"), true},
		{"llm_infer without output_schema", schemaInfer(""), false},
		{"llm_infer with output_schema inline", schemaInfer(`output_schema = "inline"` + "\n"), false},
		{"llm_infer with an output_schema file", schemaInfer(`output_schema = "schemas/in.json"` + "\n"), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			plan := load(t, writeSchemaWorkflow(t, c.src), false)
			if got := slices.Contains(plan.Families, "schema"); got != c.linked {
				t.Errorf("families %v: schema linked = %v, want %v", plan.Families, got, c.linked)
			}
			pkgs := deps(t, plan)
			for _, p := range []string{jsonschemaModule, schemaFamily} {
				if linksAny(pkgs, p) != c.linked {
					t.Errorf("links %s = %v, want %v", p, !c.linked, c.linked)
				}
			}
		})
	}
}

// TestSealedServeWithoutSchemaLinksNoJSONSchema: the sealed serve binary
// of a workflow without a schema holds neither the module nor any of its
// functions; the same workflow with an input_schema links it and
// validates requests end to end (400 with every failure, sorted).
func TestSealedServeWithoutSchemaLinksNoJSONSchema(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two sealed binaries")
	}
	build := func(src, name string) *gen.BuildResult {
		res, err := gen.Build(context.Background(), gen.BuildOptions{
			Workflow: writeSchemaWorkflow(t, src), Output: filepath.Join(t.TempDir(), name), KilnSource: repoRoot(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	linked := func(bin string) (module, funcs bool) {
		info, err := buildinfo.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		module = slices.ContainsFunc(info.Deps, func(m *debug.Module) bool { return m.Path == jsonschemaModule })
		for f := range funcNames(t, bin) {
			if strings.HasPrefix(f, jsonschemaModule+".") || strings.HasPrefix(f, schemaFamily+".") {
				return module, true
			}
		}
		return module, false
	}

	plain := build(schemaServe(""), "plain")
	if mod, funcs := linked(plain.Binary); mod || funcs {
		t.Errorf("the serve binary without a schema links jsonschema: module %v, functions %v", mod, funcs)
	}

	checked := build(schemaServe(`input_schema = "schemas/in.json"`+"\n"), "checked")
	if mod, funcs := linked(checked.Binary); !mod || !funcs {
		t.Fatalf("positive control: the serve binary with an input_schema does not link jsonschema: module %v, functions %v", mod, funcs)
	}
	base := startServe(t, checked.Binary)
	code, body := post(t, base+"/hook", `{"event":"push","n":1}`)
	if code != 200 || !strings.Contains(body, `"event":"push"`) {
		t.Fatalf("valid input: %d %s", code, body)
	}
	code, body = post(t, base+"/hook", `{"event":5,"n":1.5}`)
	var reply struct {
		Error   string   `json:"error"`
		Details []string `json:"details"`
	}
	if err := json.Unmarshal([]byte(body), &reply); err != nil || code != 400 || reply.Error != "input does not match input_schema" {
		t.Fatalf("invalid input: %d %s (%v)", code, body, err)
	}
	if len(reply.Details) != 2 || !strings.HasPrefix(reply.Details[0], "/event: ") || !strings.HasPrefix(reply.Details[1], "/n: ") {
		t.Errorf("details = %q, want /event and /n, sorted", reply.Details)
	}
	if code, body = post(t, base+"/hook", `{"n":1}`); code != 400 || !strings.Contains(body, `"/: missing properties: 'event'"`) {
		t.Errorf("missing property: %d %s", code, body)
	}
}

// TestPrunedBuildWithoutSchemaFamilyFailsClosed: a program that declares
// a schema but does not link the schema family (a hand-edited
// capabilities_gen.go) refuses to start, naming the schema, instead of
// serving or running without validation.
func TestPrunedBuildWithoutSchemaFamilyFailsClosed(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs")
	}
	for _, c := range []struct {
		name, src string
		args      []string
		want      string
	}{
		{"input_schema", schemaServe(`input_schema = "schemas/in.json"` + "\n"),
			[]string{"--bind", "127.0.0.1:0"}, `http_routes[0] POST /hook: input_schema "schemas/in.json": this binary does not link the schema capability family`},
		{"output_schema", schemaInfer(`output_schema = "schemas/in.json"` + "\n"),
			[]string{"--input", "-"}, `output_schema "schemas/in.json": this binary does not link the schema capability family`},
	} {
		t.Run(c.name, func(t *testing.T) {
			plan := load(t, writeSchemaWorkflow(t, c.src), false)
			if !slices.Contains(plan.Families, "schema") {
				t.Fatalf("families %v lack schema", plan.Families)
			}
			modDir, _ := genModule(t, plan, "main")
			capsFile := filepath.Join(modDir, "capabilities_gen.go")
			src := mustRead(t, capsFile)
			line := []byte("\t_ \"" + schemaFamily + "\"\n")
			if !bytes.Contains(src, line) {
				t.Fatalf("capabilities_gen.go does not import the schema family:\n%s", src)
			}
			writeFile(t, capsFile, bytes.Replace(src, line, nil, 1))
			bin := filepath.Join(t.TempDir(), "pruned")
			goRun(t, modDir, nil, "build", "-trimpath", "-o", bin, ".")

			cmd := exec.Command(bin, append(c.args, "--state-dir", t.TempDir())...)
			cmd.Stdin = strings.NewReader(`{}`)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			done := make(chan error, 1)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(out.String(), c.want) {
					t.Fatalf("exit %v, want a failure naming %q:\n%s", err, c.want, out.String())
				}
				if testing.Verbose() {
					t.Logf("refused: %s", out.String())
				}
			case <-time.After(60 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("still running after 60 s (serving without validation?):\n%s", out.String())
			}
			if strings.Contains(out.String(), "listening") {
				t.Errorf("it listened before refusing:\n%s", out.String())
			}
		})
	}
}

var servingAddr = regexp.MustCompile(`addr=(127\.0\.0\.1:[0-9]+)`)

// startServe runs bin in serve mode on a loopback port and returns its
// base URL; the process is stopped with SIGTERM when the test ends.
func startServe(t *testing.T, bin string) string {
	t.Helper()
	cmd := exec.Command(bin, "--bind", "127.0.0.1:0", "--state-dir", t.TempDir())
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var log bytes.Buffer
	addr := make(chan string, 1)
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if m := servingAddr.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	select {
	case a := <-addr:
		return "http://" + a
	case <-exited:
		t.Fatalf("the server exited before listening:\n%s", log.String())
	case <-time.After(60 * time.Second):
		t.Fatal("the server did not log its address within 60 s") // the log is still being written: not shown
	}
	return ""
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(data)
}
