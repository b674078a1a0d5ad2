package etcdfence

import (
	"fmt"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/tokentext"
)

// TokenDigits is the width of a token as this package stores it: decimal,
// zero-padded to the 19 digits of the largest int64, so that etcd's
// byte-wise comparison of two stored tokens orders them as numbers.
const TokenDigits = tokentext.Width

// padToken returns tok as stored: [TokenDigits] decimal digits.
func padToken(tok fence.Token) string { return tokentext.Pad(tok) }

// parseToken reads a stored token.
func parseToken(s string) (fence.Token, bool) { return tokentext.Parse(s) }

// encodeRecord returns the data key's value: the token, then the value.
func encodeRecord(tok fence.Token, value []byte) string {
	b := make([]byte, 0, TokenDigits+len(value))
	b = fmt.Appendf(b, "%0*d", TokenDigits, int64(tok))
	return string(append(b, value...))
}

// decodeRecord reads a data key's value.
func decodeRecord(key string, b []byte) (fence.Record, error) {
	if len(b) < TokenDigits {
		return fence.Record{}, fmt.Errorf("%w: data of %q: %d bytes, shorter than a token", ErrCorrupt, key, len(b))
	}
	tok, ok := parseToken(string(b[:TokenDigits]))
	if !ok {
		return fence.Record{}, fmt.Errorf("%w: data of %q: token %q", ErrCorrupt, key, b[:TokenDigits])
	}
	return fence.Record{Token: tok, Value: b[TokenDigits:]}, nil
}
