package redisfence_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	redisfence "github.com/fencelock/fencelock/fence/redis"
	"github.com/fencelock/fencelock/internal/testkit/redistest"
)

// TestSlot holds Slot to the slots Redis's own documentation and CLUSTER
// KEYSLOT give.
func TestSlot(t *testing.T) {
	tests := []struct {
		key  string
		want int
	}{
		{"foo", 12182},
		{"bar", 5061},
		{"123456789", 0x31C3 % redisfence.Slots},
		{"{user1000}.following", 3443},
		{"{user1000}.followers", 3443},
		{"user1000", 3443},
		{"foo{}{bar}", redisfence.Slot("foo{}{bar}")}, // empty tag: the whole key
		{"foo{{bar}}zap", redisfence.Slot("{bar")},    // the tag is "{bar"
		{"foo{bar}{zap}", 5061},                       // the first tag only
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			if got := redisfence.Slot(tt.key); got != tt.want {
				t.Errorf("Slot(%q): got %d, want %d", tt.key, got, tt.want)
			}
		})
	}
	if a, b := redisfence.Slot("foo{}{bar}"), redisfence.Slot("{bar}"); a == b {
		t.Errorf("Slot of a key whose first tag is empty: got the slot of its second tag (%d), want the whole key's", a)
	}
}

// TestSlotAsTheServer holds Slot to a cluster node's CLUSTER KEYSLOT.
func TestSlotAsTheServer(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: redistest.NewCluster(t), Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { c.Close() })
	for _, k := range []string{"", "a", "fencelock-test:k", "p:{acct}:a", "{}", "{a}{b}", "x{y", "x}y{z}", "é{ü}", "\xff\x00"} {
		want, err := c.ClusterKeySlot(t.Context(), k).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %q: %v", k, err)
		}
		if got := redisfence.Slot(k); int64(got) != want {
			t.Errorf("Slot(%q): got %d, want %d (the server's)", k, got, want)
		}
	}
}
