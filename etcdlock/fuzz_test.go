package etcdlock

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// FuzzKeyLayout: a name validateName accepts cannot escape its queue: its
// keys lie under prefix+"lock/" (or "elect/", or "sem/"), the name reads
// back from them unchanged, and no other accepted name's queue contains
// them, also when either name holds '/' or '%'.
func FuzzKeyLayout(f *testing.F) {
	for _, s := range []string{"job", "a/b", "a%2Fb", "%", "a%", "/", "//", "..", "../x", "", "\x00", "a\nb", "name with space", "ü-ö", "\xff", strings.Repeat("x", MaxNameLen+1)} {
		f.Add(s, "job")
	}
	c := &Client{o: defaultOptions()}
	f.Fuzz(func(t *testing.T, name, other string) {
		if err := validateName(name); err != nil {
			if name != "" && len(name) <= MaxNameLen && utf8.ValidString(name) && !strings.ContainsFunc(name, badNameRune) {
				t.Fatalf("validateName(%q) = %v, want nil", name, err)
			}
			return
		}
		if strings.ContainsFunc(name, badNameRune) || name == "" || len(name) > MaxNameLen {
			t.Fatalf("validateName(%q) = nil, want an error", name)
		}
		for _, sp := range []struct {
			space, under string
			queue        func(string) string
		}{
			{spaceLock, c.o.prefix + "lock/", c.keys().lockQueue},
			{spaceElect, c.o.prefix + "elect/", c.keys().electionQueue},
			{spaceSem, c.o.prefix + "sem/", c.keys().semQueue},
			{spaceSem, c.o.prefix + "sem/", c.keys().semPermits},
		} {
			key := sp.queue(name) + "0123456789abcdef-0"
			if !strings.HasPrefix(key, sp.under) {
				t.Fatalf("key %q of name %q is not under %q", key, name, sp.under)
			}
			if got, ok := c.keys().nameIn(sp.space, key); !ok || got != name {
				t.Fatalf("key %q of name %q: name reads back as %q (%v)", key, name, got, ok)
			}
			if validateName(other) == nil && other != name && strings.HasPrefix(key, sp.queue(other)) {
				t.Fatalf("key %q of %q lies in the queue of %q", key, name, other)
			}
		}
	})
}

func badNameRune(r rune) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0)
}

// FuzzEntryOf: any value in a queue key reads as an Entry, never a panic;
// an owner is reported only from a record this package can read.
func FuzzEntryOf(f *testing.F) {
	f.Add([]byte(`{"v":1,"owner":"host-7/4121","acquired":"2026-11-30T10:02:03.5Z","data":"run 42"}`))
	f.Add([]byte(``))
	f.Add([]byte(`{"v":2,"owner":"future"}`))
	f.Add([]byte(`{"v":0,"owner":"old"}`))
	f.Add([]byte(`{"v":1,"owner":7}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, value []byte) {
		e := entryOf(&mvccpb.KeyValue{Key: []byte("/fencelock/lock/x/1-0"), Value: value, CreateRevision: 5, ModRevision: 6, Lease: 7})
		if e.Token != 5 || e.Rev != 6 || e.Lease != 7 {
			t.Fatalf("entry %#v does not carry the key's revisions and lease", e)
		}
		if e.Owner != "" {
			var r record
			if err := json.Unmarshal(value, &r); err != nil || r.V < recordVersion || r.Owner != e.Owner {
				t.Fatalf("owner %q read from %q, which is no record (%v)", e.Owner, value, err)
			}
		}
		_ = e.String()
	})
}

// FuzzPrefixLayout: of two different prefixes New accepts, neither's keys
// (queue keys of locks and elections, lane markers) lie in the other's
// queues or markers, so Clients with nested prefixes cannot see each
// other's keys.
func FuzzPrefixLayout(f *testing.F) {
	for _, s := range [][2]string{{"/fencelock/", "/fencelock/lock/jobs/"}, {"/a/", "/a/jobs/"}, {"/a", "/a/slot"}, {"lock/", "lock/lock/"},
		{"/", "/elect/x/"}, {"x", "xlock/"}, {"/a/", "/a/locks/"}} {
		f.Add(s[0], s[1])
	}
	accept := func(p string) (options, bool) {
		o := defaultOptions()
		o.prefix = p
		return o, o.validate() == nil
	}
	f.Fuzz(func(t *testing.T, p1, p2 string) {
		o1, ok1 := accept(p1)
		o2, ok2 := accept(p2)
		if !ok1 || !ok2 || o1.prefix == o2.prefix {
			return
		}
		for _, pair := range [][2]options{{o1, o2}, {o2, o1}} {
			outer, inner := pair[0].prefix, pair[1].prefix
			for _, k := range []string{inner + "lock/n/0123456789abcdef-0", inner + "elect/n/0123456789abcdef-0", inner + "slot/0123456789abcdef-0"} {
				for _, seg := range layoutSegments {
					if strings.HasPrefix(k, outer+seg+"/") {
						t.Fatalf("prefixes %q and %q both accepted: key %q of the second lies under the first's %s/", outer, inner, k, seg)
					}
				}
			}
		}
	})
}

// FuzzRecord: encodeRecordSlot writes what json.Marshal writes of the
// record (it does so by hand, for speed), whatever the owner and data.
func FuzzRecord(f *testing.F) {
	for _, s := range []string{"host-7/4121", "", `quo"te\back`, "<&>", "a\nb\x00\x1f", "ü\u2028\u2029", "\xff\xfe", "\x7f"} {
		f.Add(s, s, int64(1764583323123456789), 0, -1)
	}
	f.Add("h/1", "nightly", int64(0), 3, 2)
	f.Fuzz(func(t *testing.T, owner, data string, nanos int64, permits, slot int) {
		at := time.Unix(0, nanos)
		want := record{V: recordVersion, Owner: owner, Acquired: at.UTC().Round(time.Millisecond), Data: data, Permits: permits}
		if slot >= 0 {
			want.Slot = &slot
		}
		wb, err := json.Marshal(want)
		if err != nil { // int64 nanoseconds span the years 1677-2262, which json writes
			t.Fatal(err)
		}
		if got := encodeRecordSlot(owner, at, data, permits, slot); got != string(wb) {
			t.Fatalf("encodeRecordSlot(%q, %v, %q, %d, %d)\n got %s\nwant %s", owner, at, data, permits, slot, got, wb)
		}
	})
}
