package redisfence_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
)

// aclClient returns a client that logs in as a fresh ACL user with rules.
func aclClient(t *testing.T, rules ...any) *redis.Client {
	t.Helper()
	admin := client(t)
	user := strings.ToLower(strings.NewReplacer("/", "-", ":", "-").Replace(prefix(t)))
	user = strings.Trim(user, "-")
	args := append([]any{"acl", "setuser", user, "reset", "on", ">pw", "~*", "&*"}, rules...)
	if err := admin.Do(t.Context(), args...).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Do(t.Context(), "acl", "deluser", user) })
	return client(t, func(o *redis.Options) { o.Username, o.Password = user, "pw" })
}

// A user without EVAL/EVALSHA: refused before anything runs.
func TestReviewACLNoEval(t *testing.T) {
	c := aclClient(t, "+@all", "-eval", "-evalsha")
	s := mustNew(t, c, prefix(t))
	err := s.Put(t.Context(), "k", 5, []byte("v"))
	t.Logf("Put as a user without EVAL: %v (unknown %v, stale %v)", err, errors.Is(err, fence.ErrUnknownOutcome), errors.Is(err, fence.ErrStale))
	if err == nil || errors.Is(err, fence.ErrUnknownOutcome) || errors.Is(err, fence.ErrStale) {
		t.Fatalf("got %v", err)
	}
}

// writeError (script.go) says a Redis error reply means the script wrote
// nothing, since "the scripts ... make one write command". Delete's script
// makes two (HDEL, then HSET). A user who may HDEL but not HSET: the HDEL
// lands, the HSET fails, and Delete says "refused by Redis, nothing
// written" -- with the value gone, the floor not raised and the version
// not counted.
func TestReviewDeleteWritesThenErrors(t *testing.T) {
	admin := client(t)
	p := prefix(t)
	mustPut(t, mustNew(t, admin, p), "k", 5, "v")
	c := aclClient(t, "+@all", "-hset")
	s := mustNew(t, c, p)
	err := s.Delete(t.Context(), "k", 7)
	floor, version := field(t, admin, s.Key("k"), "floor"), field(t, admin, s.Key("k"), "version")
	_, gerr := mustNew(t, admin, p).Get(t.Context(), "k")
	if err != nil && errors.Is(gerr, fence.ErrNotFound) {
		t.Fatalf("Delete(7) returned %q, but it wrote: Get now says %v; floor %s (not raised to 7), version %s (not counted)", err, gerr, floor, version)
	}
}

// A wrong password: the handshake fails before the script is sent.
func TestReviewWrongPassword(t *testing.T) {
	c := client(t, func(o *redis.Options) { o.Username, o.Password = "nobody-review", "wrong" })
	s := mustNew(t, c, prefix(t))
	err := s.Put(t.Context(), "k", 5, []byte("v"))
	t.Logf("Put with a wrong password: %v", err)
	if err == nil || errors.Is(err, fence.ErrUnknownOutcome) {
		t.Fatalf("got %v", err)
	}
}
