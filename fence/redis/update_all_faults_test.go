package redisfence_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/fencelock/fencelock/fence"
	redisfence "github.com/fencelock/fencelock/fence/redis"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// The two accounts of the UpdateAll tests: one hash tag, one slot.
const acctA, acctB = "{acct}:a", "{acct}:b"

// transfer is an UpdateAllFunc that moves n from acctA to acctB, and calls
// before (if not nil) before it returns, on its first call.
func transfer(n int, before func()) fence.UpdateAllFunc {
	calls := 0
	return func(old map[string]fence.Record) (map[string][]byte, error) {
		if calls++; calls == 1 && before != nil {
			before()
		}
		a, err := strconv.Atoi(string(old[acctA].Value))
		if err != nil {
			return nil, err
		}
		b, err := strconv.Atoi(string(old[acctB].Value))
		if err != nil {
			return nil, err
		}
		return map[string][]byte{acctA: []byte(strconv.Itoa(a - n)), acctB: []byte(strconv.Itoa(b + n))}, nil
	}
}

func both(token fence.Token) []fence.Claim {
	return []fence.Claim{{Resource: acctA, Token: token}, {Resource: acctB, Token: token}}
}

// An UpdateAll whose write loses its reply says so (ErrUnknownOutcome) and
// ran once, though the client resends commands, even when a newer token's
// write lands in between: both legs landed, once. The control lets go-redis
// resend the script: the copy, refused by the newer floor, says stale of a
// transfer that landed.
func TestUpdateAllReplyLostSentOnce(t *testing.T) {
	run := func(t *testing.T) (version string, err error) {
		var f faults
		c := client(t, f.options)
		s := mustNew(t, c, prefix(t))
		other := mustNew(t, client(t), s.Prefix())
		mustPut(t, s, acctA, 5, "100")
		mustPut(t, s, acctB, 5, "100")
		// Both scripts on the server: the armed reply is the write's.
		if err := s.UpdateAll(t.Context(), both(5), transfer(0, nil)); err != nil {
			t.Fatal(err)
		}
		err = s.UpdateAll(t.Context(), both(7), transfer(10, func() {
			f.loseNextReply(func() { mustPut(t, other, acctA, 9, "0") })
		}))
		fencewant.Record(t, other, acctA, 9, "0")
		fencewant.Record(t, other, acctB, 7, "110")
		return field(t, client(t), s.Key(acctB), "version"), err
	}
	version, err := run(t)
	fencewant.Unknown(t, err, 7)
	if version != "3" {
		t.Fatalf("version of %s after a put and two transfers (the last one's reply lost): got %s, want 3: the transfer ran once", acctB, version)
	}
	t.Run("control: resent", func(t *testing.T) {
		defer redisfence.ResendForTest()()
		version, err := run(t)
		if !errors.Is(err, fence.ErrStale) || version != "3" {
			t.Fatalf("resent: got %v and version %s, want ErrStale of a transfer that landed (version 3)", err, version)
		}
	})
}

// A transfer's write held up in the network while another transfer lands
// is refused as a whole when it arrives: after the same token's, it reads
// again and moves the money once; after a newer token's, it gives a
// *fence.StaleError and nothing of it lands.
func TestUpdateAllLateWrite(t *testing.T) {
	for _, tt := range []struct {
		name       string
		token      fence.Token
		a, b       string
		wantCalled int
	}{
		{"after the same holder's transfer", 7, "89", "111", 2},
		{"after a newer holder's transfer", 9, "99", "101", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var f faults
			s := mustNew(t, client(t, f.options), prefix(t))
			other := mustNew(t, client(t), s.Prefix())
			mustPut(t, s, acctA, 5, "100")
			mustPut(t, s, acctB, 5, "100")
			calls := 0
			fn := transfer(10, func() {
				held, release := f.holdNextRequest()
				go func() {
					<-held
					if err := other.UpdateAll(t.Context(), both(tt.token), transfer(1, nil)); err != nil {
						t.Errorf("the other transfer: %v", err)
					}
					close(release)
				}()
			})
			err := s.UpdateAll(t.Context(), both(7), func(old map[string]fence.Record) (map[string][]byte, error) {
				calls++
				return fn(old)
			})
			if tt.token == 7 && err != nil {
				t.Fatalf("UpdateAll whose write was held while the same token wrote: got %v, want nil after reading again", err)
			}
			if tt.token == 9 {
				fencewant.Stale(t, err, 7, 9)
			}
			if calls != tt.wantCalled {
				t.Errorf("calls of fn: got %d, want %d", calls, tt.wantCalled)
			}
			fencewant.Record(t, other, acctA, tt.token, tt.a)
			fencewant.Record(t, other, acctB, tt.token, tt.b)
		})
	}
}

// With the script cache flushed between UpdateAll's claim and its write
// (SCRIPT FLUSH, a restart, a failover), the write's EVALSHA is refused
// with NOSCRIPT and sent again as EVAL, once: the transfer lands once.
func TestUpdateAllScriptFlushedBetween(t *testing.T) {
	c := client(t)
	s := mustNew(t, c, prefix(t))
	mustPut(t, s, acctA, 5, "100")
	mustPut(t, s, acctB, 5, "100")
	err := s.UpdateAll(t.Context(), both(5), transfer(10, func() {
		if err := c.ScriptFlush(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
	}))
	if err != nil {
		t.Fatalf("UpdateAll with the script cache flushed before its write: %v", err)
	}
	fencewant.Record(t, s, acctA, 5, "90")
	fencewant.Record(t, s, acctB, 5, "110")
}
