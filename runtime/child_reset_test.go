package runtime

import (
	"reflect"
	"testing"
	"time"
)

// A worker's child memory is reused for its next child: after reset,
// every field of the run that runChild does not set itself must be zero,
// so nothing of one child (its outputs, trigger, loop counts, response,
// trace, outcome, grandchildren) reaches the next. Run gaining a field
// fails here until reset (or runChild) takes care of it.
func TestChildStateResetIsComplete(t *testing.T) {
	// runChild assigns these for every child.
	setByRunChild := map[string]bool{
		"Engine": true, "Program": true, "idNum": true, "StartNode": true, "DryRun": true,
		"Deadline": true, "Depth": true, "Counters": true, "budget": true, "parent": true,
		"lazyTrigger": true, "triggerKind": true, "triggerInput": true, "outputs": true, "begun": true,
	}
	st := &childState{}
	c := &st.run
	// What a finished child may leave behind.
	c.spare.Store(&childState{})
	c.children.Store(7)
	c.call = Call{Run: c, Attempt: 2}
	c.completion = Outcome{Status: StatusCompleted, FinalValue: "old", LastNode: "n", Reason: "r", ElapsedMS: 3, RunID: "id", HTTPResponse: &HTTPResponse{}, Err: &Error{}}
	// reset clears Call and Outcome field by field: every field of theirs
	// is set here, so one it does not know about stays and fails below.
	fillFields(t, reflect.ValueOf(&c.call).Elem())
	fillFields(t, reflect.ValueOf(&c.completion).Elem())
	c.mu.Lock()
	c.outputs = st.outputs[:]
	c.mu.Unlock()
	c.trigger = map[string]any{"kind": "old"}
	c.triggerOnce.Do(func() {})
	c.ExecutionID = "run-1.4"
	c.idOnce.Do(func() {})
	c.loops = map[int]int{0: 1}
	c.trace = &Trace{}
	c.respond = &HTTPResponse{}
	c.last = "n"
	c.ended = time.Now()
	c.nodeAt = time.Second
	for i := range st.outputs {
		st.outputs[i] = nodeOutput{value: "old", set: true}
	}

	st.reset()

	rt := reflect.TypeFor[Run]()
	rv := reflect.ValueOf(c).Elem()
	for i := range rt.NumField() {
		f := rt.Field(i)
		if setByRunChild[f.Name] {
			continue
		}
		if !rv.Field(i).IsZero() {
			t.Errorf("Run.%s is not zero after reset: the next child would see the previous child's", f.Name)
		}
	}
	for i, o := range st.outputs {
		if o != (nodeOutput{}) {
			t.Errorf("outputs[%d] = %#v after reset", i, o)
		}
	}
	// The test above knows every field: one it has not set cannot show
	// that reset clears it.
	known := map[string]bool{"spare": true, "children": true, "call": true, "completion": true, "mu": true,
		"ExecutionID": true, "idOnce": true, "trigger": true, "triggerOnce": true, "loops": true, "trace": true, "respond": true, "last": true, "nodeAt": true, "ended": true}
	for i := range rt.NumField() {
		if n := rt.Field(i).Name; !setByRunChild[n] && !known[n] {
			t.Errorf("Run has a new field %s: have childState.reset clear it (or runChild set it) and add it here", n)
		}
	}
}

// fillFields sets every field of the struct v to a value that is not zero.
func fillFields(t *testing.T, v reflect.Value) {
	t.Helper()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("old")
		case reflect.Int, reflect.Int64:
			f.SetInt(3)
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		case reflect.Map:
			f.Set(reflect.MakeMap(f.Type()))
		case reflect.Interface:
			f.Set(reflect.ValueOf("old"))
		default:
			t.Fatalf("%s.%s: a %s this test cannot fill", v.Type(), v.Type().Field(i).Name, f.Kind())
		}
	}
}
