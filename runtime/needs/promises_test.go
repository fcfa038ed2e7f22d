package needs

import (
	"encoding/json"
	"strings"
	"testing"
)

// Errors in an approvals file name the line they are on, counting every
// line before it (blank lines and comments included).
func TestApprovalsErrorsNameTheirLine(t *testing.T) {
	_, err := decodeApprovals("network = [\"api.example.com\"]\n\n# a comment\nbogus = 1\n")
	if err == nil || !strings.HasPrefix(err.Error(), "line 4: ") {
		t.Fatalf("got %v, want an error on line 4", err)
	}
}

// A bare key is read whole, whatever its letters, digits, _ and -, so an
// unknown key is named as written.
func TestApprovalsUnknownBareKeyNamedWhole(t *testing.T) {
	_, err := decodeApprovals("aZz09_-A = 1\n")
	if err == nil || !strings.Contains(err.Error(), `unknown key "aZz09_-A"`) {
		t.Fatalf("got %v", err)
	}
}

// A \u escape cut short by the end of the input is an error, not a read
// past the end; one that ends exactly there is complete.
func TestApprovalsEscapeAtTheEnd(t *testing.T) {
	if _, err := decodeApprovals(`network = ["\u00`); err == nil || !strings.Contains(err.Error(), `short \u escape`) {
		t.Errorf("short escape: %v", err)
	}
	if _, err := decodeApprovals(`network = ["\u0041`); err == nil || strings.Contains(err.Error(), "short") {
		t.Errorf("complete escape at the end: %v", err)
	}
}

// The canonical needs, whose SHA-256 the manifest records, are sorted by
// id, keep every need and source, write [] (not null) for empty lists,
// end without a newline, and leave the caller's value as it was.
func TestCanonicalNeeds(t *testing.T) {
	e := &Effective{Workflow: "w", Needs: []Need{
		{ID: "secret:B", Kind: KindSecret, Key: "B", Sources: []string{"workflow:w"}},
		{ID: "secret:A", Kind: KindSecret, Key: "A"},
	}}
	got, err := e.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"workflow":"w","needs":[{"id":"secret:A","kind":"secret","optional":false,"key":"A","sources":[]},` +
		`{"id":"secret:B","kind":"secret","optional":false,"key":"B","sources":["workflow:w"]}]}`
	if string(got) != want {
		t.Fatalf("canonical\n%s\nwant\n%s", got, want)
	}
	if e.Needs[0].ID != "secret:B" || e.Needs[1].Sources != nil {
		t.Errorf("Canonical changed its input: %+v", e.Needs)
	}
	empty, err := (&Effective{Workflow: "w"}).Canonical()
	if err != nil || string(empty) != `{"workflow":"w","needs":[]}` {
		t.Errorf("no needs: %s %v", empty, err)
	}
}

// The preflight report lists needs by id with their sources ([] when
// none), and a need beyond the workflow's [policy] always requires an
// approval, with the action that names it, even when it is otherwise met.
func TestEvaluateReport(t *testing.T) {
	e := &Effective{Workflow: "w", Needs: []Need{
		{ID: "secret:B", Kind: KindSecret, Key: "B", Sources: []string{"workflow:w"}},
		{ID: "secret:A", Kind: KindSecret, Key: "A", BeyondPolicy: "not in [policy]"},
	}}
	r := Evaluate(e, Env{HasSecret: func(string) bool { return true }})
	if len(r.Needs) != 2 || r.Needs[0].ID != "secret:A" || r.Needs[1].ID != "secret:B" {
		t.Fatalf("report order: %+v", r.Needs)
	}
	if s := r.Needs[1].Source; len(s) != 1 || s[0] != "workflow:w" || r.Needs[1].Status != Satisfied {
		t.Errorf("secret:B: %+v", r.Needs[1])
	}
	a := r.Needs[0]
	if a.Source == nil || a.Status != ApprovalRequired || a.Action == nil || a.Action.Type != "approve_secret_access" ||
		!strings.Contains(a.Detail, "beyond the workflow's [policy]: not in [policy]") {
		t.Errorf("secret:A beyond policy: %+v %+v", a, a.Action)
	}
	if r.Status != Blocked {
		t.Errorf("status %s, want %s", r.Status, Blocked)
	}
	out, err := json.Marshal(r)
	if err != nil || !strings.Contains(string(out), `"source":[]`) {
		t.Errorf("report JSON %s %v", out, err)
	}
}
