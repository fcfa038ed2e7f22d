package runtime

import (
	"reflect"
	"sync/atomic"
	"testing"
)

// A RunChildren worker counts its children in counters of its own and
// moves them to the parent's when it is done: every counter must move,
// or a report would under-count what the children did. Counters gaining
// a field fails here until moveTo moves it.
func TestCountersMoveToMovesEveryField(t *testing.T) {
	var from, to Counters
	fv, tv := reflect.ValueOf(&from).Elem(), reflect.ValueOf(&to).Elem()
	for i := range fv.NumField() {
		fv.Field(i).Addr().Interface().(*atomic.Int64).Store(int64(i + 1))
		tv.Field(i).Addr().Interface().(*atomic.Int64).Store(100)
	}
	from.moveTo(&to)
	for i := range fv.NumField() {
		name := fv.Type().Field(i).Name
		if got := tv.Field(i).Addr().Interface().(*atomic.Int64).Load(); got != int64(100+i+1) {
			t.Errorf("%s: parent has %d after the move, want %d", name, got, 100+i+1)
		}
		if got := fv.Field(i).Addr().Interface().(*atomic.Int64).Load(); got != 0 {
			t.Errorf("%s: worker still has %d after the move: the next move would count it again", name, got)
		}
	}
}
