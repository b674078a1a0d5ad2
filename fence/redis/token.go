package redisfence

import (
	"fmt"
	"strconv"

	"github.com/fencelock/fencelock/fence"
)

// TokenDigits is the width of a token as this package stores it: decimal,
// zero-padded to the 19 digits of the largest int64. The scripts compare
// two stored tokens digit by digit: Lua's numbers are doubles, exact only
// up to 2^53, and its string order follows the server's locale.
const TokenDigits = 19

// padToken returns tok as stored: [TokenDigits] decimal digits.
func padToken(tok fence.Token) string { return fmt.Sprintf("%0*d", TokenDigits, int64(tok)) }

// parseToken reads a stored token.
func parseToken(s string) (fence.Token, bool) {
	if len(s) != TokenDigits {
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
