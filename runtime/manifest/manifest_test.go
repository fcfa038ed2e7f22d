package manifest

import (
	"bytes"
	"strings"
	"testing"
)

func sample() *Manifest {
	return &Manifest{
		Schema:      Schema,
		Workflow:    Workflow{Name: "hello", Digest: strings.Repeat("ab", 32)},
		KilnVersion: "v1.2.3",
		BuildTags:   []string{"kiln_custom", "kiln_control"},
		Families:    []Family{{ID: "control", Package: "github.com/kilnworks/kiln/capabilities/control", Tag: "kiln_control", Keys: []string{"flow.control"}}},
		NodeKinds:   []string{"terminate"},
		Inputs:      []Input{{Path: "workflow.toml", Kind: "workflow", SHA256: strings.Repeat("ab", 32)}},
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	data, err := Encode(sample())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(data, []byte("}\n")) || !bytes.Contains(data, []byte(`  "schema": "kiln.manifest/v1",`)) {
		t.Errorf("not canonical indented JSON:\n%s", data)
	}
	m, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Encode(m)
	if !bytes.Equal(data, again) {
		t.Errorf("re-encoding changed the bytes:\n%s\n---\n%s", data, again)
	}
	if _, err := Decode([]byte(`{"schema":"other/v9"}`)); err == nil || !strings.Contains(err.Error(), "other/v9") {
		t.Errorf("foreign schema accepted: %v", err)
	}
	if _, err := Decode([]byte(`{`)); err == nil {
		t.Error("broken JSON accepted")
	}
}

func TestWrapUnwrapFind(t *testing.T) {
	data, _ := Encode(sample())
	blob := Wrap(data)
	got, err := Unwrap([]byte(blob))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Unwrap = %q, %v", got, err)
	}
	if _, err := Unwrap([]byte(blob + "x")); err == nil {
		t.Error("trailing bytes accepted")
	}
	if _, err := Unwrap(data); err == nil {
		t.Error("bare JSON accepted as a blob")
	}

	// A binary holds the blob among other bytes, plus stray copies of the
	// begin marker (the manifest package's own constant): Find skips those.
	bin := []byte("\x7fELF....." + begin + "garbage" + begin + "12x" + blob + "....." + begin)
	got, err = Find(bin)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Find = %q, %v", got, err)
	}
	// The same blob twice is fine; two different ones are not.
	if _, err := Find([]byte(blob + blob)); err != nil {
		t.Errorf("duplicate identical blob: %v", err)
	}
	other := sample()
	other.Workflow.Name = "evil"
	odata, _ := Encode(other)
	if _, err := Find([]byte(blob + Wrap(odata))); err == nil || !strings.Contains(err.Error(), "two different") {
		t.Errorf("two different manifests: %v", err)
	}
	if _, err := Find([]byte("no manifest here" + begin)); err == nil || !strings.Contains(err.Error(), "no embedded kiln manifest") {
		t.Errorf("missing manifest: %v", err)
	}
	// A length that runs past the end, or a wrong end marker, is no blob.
	cut := blob[:len(blob)-3]
	if _, err := Find([]byte(cut)); err == nil {
		t.Error("truncated blob accepted")
	}
}

func TestKilnVersionInTests(t *testing.T) {
	// A test binary of this module is a development build.
	if v := KilnVersion(); v != "devel" && !strings.HasPrefix(v, "v") {
		t.Errorf("KilnVersion = %q", v)
	}
}
