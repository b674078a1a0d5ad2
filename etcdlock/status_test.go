package etcdlock_test

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/fencelock/fencelock/etcdlock"
)

// checkStatus checks watched, a first status WatchStatus sent for scope,
// against what c.Status reads (the same, but for the TTLs: the time left,
// not the granted TTL), its sections against its typed fields, and, for
// the scope of every name, each section's names against List's.
func checkStatus(t *testing.T, c *etcdlock.Client, scope etcdlock.StatusScope, watched etcdlock.Status) {
	t.Helper()
	read, err := c.Status(t.Context(), scope)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	for _, e := range entries(&read) {
		if e.TTL < 0 { // a 1 s lease has 0 s left, in etcd's whole seconds
			t.Errorf("Status: %s: TTL %v, want the time its lease has left", e.Key, e.TTL)
		}
	}
	for _, st := range []*etcdlock.Status{&watched, &read} {
		sectionsMatchFields(t, *st)
	}
	// normalize zeroes the entries' TTLs, shared with the caller's
	// watched: the caller has checked them.
	normalize(&watched)
	normalize(&read)
	if !reflect.DeepEqual(read, watched) {
		t.Errorf("Status read\n%+v\nwant WatchStatus's first\n%+v", read, watched)
	}
	if len(scope.Names) > 0 {
		return
	}
	for _, sec := range read.Sections {
		names, err := c.List(t.Context(), sec.Kind)
		if err != nil {
			t.Fatalf("List(%q): %v", sec.Kind, err)
		}
		var want []string
		for _, n := range sec.Names {
			want = append(want, n.Name)
		}
		if !slices.Equal(names, want) {
			t.Errorf("List(%q) = %q, want the section's names, %q", sec.Kind, names, want)
		}
	}
}

// sectionsMatchFields checks st's sections: one per kind, in the order of
// Kinds, each with the values of its typed field.
func sectionsMatchFields(t *testing.T, st etcdlock.Status) {
	t.Helper()
	var kinds []string
	for _, sec := range st.Sections {
		kinds = append(kinds, sec.Kind)
	}
	if !slices.Equal(kinds, etcdlock.Kinds()) {
		t.Errorf("sections of kinds %q, want %q", kinds, etcdlock.Kinds())
	}
	for _, tt := range []struct {
		kind  string
		field any
	}{
		{"lock", st.Locks}, {"election", st.Elections}, {"semaphore", st.Semaphores}, {"group", st.Groups},
	} {
		var values []any
		for _, n := range st.Section(tt.kind).Names {
			values = append(values, n.Value)
		}
		field := reflect.ValueOf(tt.field)
		var want []any
		for i := range field.Len() {
			want = append(want, field.Index(i).Interface())
		}
		if !reflect.DeepEqual(values, want) {
			t.Errorf("section %q: got %+v, want its field's %+v", tt.kind, values, want)
		}
	}
}

// List refuses a kind that is none of Kinds.
func TestListUnknownKind(t *testing.T) {
	t.Parallel()
	c := newLocker(t, etcdClient(t))
	if _, err := c.List(t.Context(), "locks"); !errors.Is(err, etcdlock.ErrInvalidArgument) {
		t.Errorf("List(\"locks\"): got %v, want ErrInvalidArgument", err)
	}
}
