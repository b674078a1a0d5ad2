package etcdlock

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"
	"unicode/utf8"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// encodeRecordSlot8dd50a2 is encodeRecordSlot as commit 8dd50a2 wrote it
// (json.Marshal of the record), but for its panic, returned as an error:
// clients of that version and of this one share a cluster's keys.
func encodeRecordSlot8dd50a2(owner string, at time.Time, data string, permits, slot int) (string, error) {
	r := record{V: recordVersion, Owner: owner, Acquired: at.UTC().Round(time.Millisecond), Data: data, Permits: permits}
	if slot >= 0 {
		r.Slot = &slot
	}
	b, err := json.Marshal(r)
	return string(b), err
}

// recordEdgeStrings are owners and data an encoder by hand may get wrong:
// every character json.Marshal escapes, invalid and surrogate UTF-8, and
// the boundaries of each UTF-8 length.
func recordEdgeStrings() []string {
	s := []string{"", "host-7/4121", `"`, `\`, "/", "<", ">", "&", "\u2028", "\u2029", "\x7f", "\u0080", "\u07ff", "\u0800",
		"\uffff", "\U00010000", "\U0010ffff", "\ufffd", "\xff", "\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "a\xe2\x80", "ü\xe2\x80\xa8x"}
	for b := range 0x20 {
		s = append(s, string(rune(b)), "x"+string(rune(b))+"y")
	}
	for b := 0x80; b < 0x100; b++ {
		s = append(s, string([]byte{byte(b)}), "ok"+string([]byte{byte(b)}))
	}
	return s
}

// recordEdgeTimes are acquisition times at the edges of what the record
// writes: zones (one with seconds in its offset), a monotonic reading,
// rounding across a second, a day and a year, the years 0 and 9999, and
// instants before 1970.
func recordEdgeTimes(t *testing.T) []time.Time {
	t.Helper()
	lmt := time.FixedZone("LMT", 19*60+32) // Amsterdam, 1835-1937: +00:19:32
	times := []time.Time{
		{}, time.Now(), time.Now().In(lmt), time.Unix(0, 0), time.Unix(0, -1), time.Unix(0, -500_000), time.Unix(0, -1_500_000),
		time.Unix(0, math.MinInt64), time.Unix(0, math.MaxInt64), time.Unix(1764583323, 499_999), time.Unix(1764583323, 500_000),
		time.Unix(1764583323, 999_500_000), time.Date(2026, 12, 31, 23, 59, 59, 999_600_000, time.UTC),
		time.Date(1900, 1, 1, 0, 0, 0, 0, lmt), time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999_000_000, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 0, time.FixedZone("", -14*3600)),
		time.Date(2026, 3, 29, 2, 30, 0, 123_456_789, time.FixedZone("", 14*3600)),
	}
	for _, name := range []string{"Europe/Amsterdam", "America/St_Johns", "Asia/Kathmandu", "Pacific/Kiritimati"} {
		if loc, err := time.LoadLocation(name); err == nil {
			times = append(times, time.Date(1920, 6, 1, 12, 0, 0, 7e8, loc), time.Now().In(loc))
		}
	}
	return times
}

// TestRecordSameAs8dd50a2: the record written by hand is byte for byte the
// one the previous version wrote with json.Marshal, for every edge owner,
// data, time, permits and slot.
func TestRecordSameAs8dd50a2(t *testing.T) {
	strs := recordEdgeStrings()
	nums := []int{math.MinInt, -2, -1, 0, 1, 2, 9, 10, math.MaxInt32, math.MaxInt}
	check := func(owner string, at time.Time, data string, permits, slot int) {
		want, err := encodeRecordSlot8dd50a2(owner, at, data, permits, slot)
		if err != nil {
			return // the previous version panicked: see TestRecordYearsPast9999
		}
		if got := encodeRecordSlot(owner, at, data, permits, slot); got != want {
			t.Fatalf("encodeRecordSlot(%q, %v, %q, %d, %d)\n got %s\nwant %s", owner, at, data, permits, slot, got, want)
		}
	}
	for _, at := range recordEdgeTimes(t) {
		for _, n := range nums {
			check("h/1", at, "", n, n)
			check("h/1", at, "d", 0, n)
		}
	}
	for _, s := range strs {
		for _, u := range strs {
			check(s, time.Unix(1764583323, 0), u, 3, 1)
		}
	}
	for r := rune(0); r <= utf8.MaxRune; r++ { // every character, alone and among others
		if s := string(r); r%4096 == 0 || r < 0x3000 || (r >= 0xd700 && r < 0xe100) || r >= 0xfff0 && r < 0x10010 {
			check(s, time.Time{}, "a"+s+"b", 0, -1)
		}
	}
}

// TestRecordYearsPast9999: json.Marshal refuses a year past 9999 (the
// previous version then panicked in Lock); the record written by hand
// instead is one no version reads: its owner reads as unknown. No clock
// of a running machine is there: the test pins the behaviour, not a need.
func TestRecordYearsPast9999(t *testing.T) {
	at := time.Date(9999, 12, 31, 23, 59, 59, 999_600_000, time.UTC) // rounds to year 10000
	if _, err := encodeRecordSlot8dd50a2("h/1", at, "", 0, -1); err == nil {
		t.Fatal("json.Marshal wrote a year past 9999")
	}
	if r := recordOf([]byte(encodeRecordSlot("h/1", at, "", 0, -1))); r.Owner != "" {
		t.Fatalf("a record of year 10000 read as %+v, want the zero record", r)
	}
}

// TestQueueKeySameAs8dd50a2: queue and marker keys built by concatenation
// are those fmt.Sprintf built, for every lease ID (the high bit set
// included: etcd's are int64) and slot.
func TestQueueKeySameAs8dd50a2(t *testing.T) {
	c := &Client{o: defaultOptions()}
	for _, id := range []int64{1, 0xf, 0x7fffffffffffffff, math.MinInt64, -1, -0x10, 0x694d9fa3c5a1b2e7} {
		for _, lane := range []int{0, 1, 9, 10, 12345} {
			s := &session{id: clientv3.LeaseID(id), hex: leaseHex(clientv3.LeaseID(id))}
			s.lanes.next = lane
			for _, sp := range []spot{{kind: kindLock, name: "n", q: c.keys().lockQueue("n")}, {kind: kindRead, name: "n", q: c.keys().lockQueue("n")}, {kind: kindSemaphore, name: "n", q: c.keys().semQueue("n"), limit: 2, agreed: 2}} {
				tk := c.ticket(s, sp)
				q := sp.q
				if sp.kind == kindRead {
					q += readerMark
				}
				wantKey := fmt.Sprintf("%s%016x-%d", q, id, tk.lane)
				wantMarker := fmt.Sprintf("%sslot/%016x-%d", c.o.prefix, id, tk.lane)
				if tk.key != wantKey || string(tk.marker) != wantMarker {
					t.Fatalf("lease %#x lane %d: key %q marker %q, want %q %q", id, tk.lane, tk.key, tk.marker, wantKey, wantMarker)
				}
			}
		}
	}
}
