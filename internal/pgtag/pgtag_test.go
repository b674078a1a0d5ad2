package pgtag_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/internal/pgtag"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParse(t *testing.T) {
	tests := []struct {
		tag    string
		lo, hi int64
		ok     bool
	}{
		{"fencelock:t=3-7", 3, 7, true},
		{"fencelock:t=5-5", 5, 5, true},
		{"fencelock:t=9223372036854775807-9223372036854775807", 9223372036854775807, 9223372036854775807, true},
		{"fencelock:t=7-3", 0, 0, false},
		{"fencelock:t=0-3", 0, 0, false},
		{"fencelock:t=-3-4", 0, 0, false},
		{"fencelock:t=3", 0, 0, false},
		{"fencelock:t=3-x", 0, 0, false},
		{"fencelock:t=9223372036854775808-9223372036854775808", 0, 0, false},
		{"psql", 0, 0, false},
		{"", 0, 0, false},
	}
	for _, tt := range tests {
		lo, hi, ok := pgtag.Parse(tt.tag)
		if lo != tt.lo || hi != tt.hi || ok != tt.ok {
			t.Errorf("Parse(%q): got %d, %d, %v, want %d, %d, %v", tt.tag, lo, hi, ok, tt.lo, tt.hi, tt.ok)
		}
	}
}
