// Package tokentext is the text form of a fencing token in stores that
// compare tokens as text or in a script: decimal, zero-padded to [Width]
// digits, so that a byte-wise comparison of two tokens (etcd's Compare on
// a value) or a digit-by-digit one (fence/redis's Lua) orders them as
// numbers. fence/etcd and fence/redis store tokens so.
package tokentext

import (
	"fmt"
	"strconv"

	"github.com/fencelock/fencelock/fence"
)

// Width is the number of digits: those of the largest int64.
const Width = 19

// Pad returns tok in [Width] digits.
func Pad(tok fence.Token) string { return fmt.Sprintf("%0*d", Width, int64(tok)) }

// Parse reads a token written by Pad; false for anything else (another
// width, a non-digit, zero).
func Parse(s string) (fence.Token, bool) {
	if len(s) != Width {
		return 0, false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return fence.Token(n), err == nil && n > 0
}
