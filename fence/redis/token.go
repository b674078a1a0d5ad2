package redisfence

import (
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/tokentext"
)

// TokenDigits is the width of a token as this package stores it: decimal,
// zero-padded to the 19 digits of the largest int64. The scripts compare
// two stored tokens digit by digit: Lua's numbers are doubles, exact only
// up to 2^53, and its string order follows the server's locale.
const TokenDigits = tokentext.Width

// padToken returns tok as stored: [TokenDigits] decimal digits.
func padToken(tok fence.Token) string { return tokentext.Pad(tok) }

// parseToken reads a stored token.
func parseToken(s string) (fence.Token, bool) { return tokentext.Parse(s) }
