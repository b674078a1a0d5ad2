package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
)

// statusJSON is the object of status --json as the tests decode it: the
// sections of the kinds they read.
type statusJSON struct {
	Locks      []queueJSON `json:"locks"`
	Elections  []queueJSON `json:"elections"`
	Semaphores []queueJSON `json:"semaphores"`
	Groups     []groupJSON `json:"groups"`
}

// watchJSONLine is a line of status --watch --json as the tests decode
// it.
type watchJSONLine struct {
	Time  time.Time `json:"time"`
	Rev   int64     `json:"rev"`
	Error string    `json:"error"`
	statusJSON
}

// A kind this command does not know (one added to etcdlock after it) shows
// as a lock does, in the table and in JSON, under its own name: status
// reads the kinds from etcdlock's Status, not from a list of its own.
func TestStatusUnknownKind(t *testing.T) {
	e := etcdlock.Entry{Key: "/k/barrier/b/1-0", Token: 7, Lease: 1, TTL: -1, Slot: -1}
	secs := []etcdlock.Section{{Kind: "barrier", Names: []etcdlock.NameStatus{
		{Name: "b", Value: etcdlock.Queue{Name: "b", Holder: &e, Holders: []etcdlock.Entry{e}}},
	}}}
	var table bytes.Buffer
	if err := printTable(&table, secs, "TTL"); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^barrier +b +holder +7 `).Match(table.Bytes()) {
		t.Errorf("table: got\n%s\nwant a row: barrier b holder 7", table.String())
	}
	b, err := json.Marshal(statusToJSON(secs))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Barriers []queueJSON `json:"barriers"`
	}
	if err := json.Unmarshal(b, &got); err != nil || len(got.Barriers) != 1 || got.Barriers[0].Holder == nil || got.Barriers[0].Holder.Token != 7 {
		t.Errorf("JSON: got %s (%v), want barriers: [b held with token 7]", b, err)
	}
}
