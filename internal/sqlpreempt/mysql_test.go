package sqlpreempt_test

import (
	"slices"
	"testing"

	"github.com/fencelock/fencelock/internal/sqlpreempt"
)

// The key as InnoDB's lock_data shows it (row_raw_format): text quoted
// with NUL and \ escaped by a backslash and ' doubled, binary in
// upper-case hex, the columns of a key joined by ", ".
func TestLockData(t *testing.T) {
	tests := []struct {
		name    string
		columns [][]string
		want    []string
	}{
		{"none", nil, nil},
		{"text", [][]string{{sqlpreempt.Quoted("acct-7")}}, []string{"'acct-7'"}},
		{"escapes", [][]string{{sqlpreempt.Quoted("a'b\\c\x00")}}, []string{`'a''b\\c\0'`}},
		{"binary", [][]string{{sqlpreempt.Hex([]byte("A\xff"))}}, []string{"0x41FF"}},
		{"two columns, two ways each", [][]string{{"'a'", "0x61"}, {"7"}}, []string{"'a', 7", "0x61, 7"}},
		{"a column with no way", [][]string{{"7"}, {}}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sqlpreempt.LockData(tt.columns...); !slices.Equal(got, tt.want) {
				t.Errorf("LockData(%q): got %q, want %q", tt.columns, got, tt.want)
			}
		})
	}
}
