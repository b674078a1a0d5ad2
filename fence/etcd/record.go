package etcdfence

import (
	"fmt"
	"strconv"

	"go.etcd.io/etcd/api/v3/mvccpb"

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

// floorLen is the length of a floor's value as this version writes it:
// the token, a colon, and the write's stamp, each of [TokenDigits] digits.
const floorLen = 2*TokenDigits + 1

// floorValue returns a floor's value: the token, then ':' and the stamp
// of the write that put it, zero-padded alike, so that etcd's byte-wise
// compare orders floors by token, and floors of one token by stamp. A
// stamp is 1 + the highest revision its Store had seen when it sent the
// write (see fencedWrite).
func floorValue(tok fence.Token, stamp int64) string {
	return fmt.Sprintf("%0*d:%0*d", TokenDigits, int64(tok), TokenDigits, stamp)
}

// parseFloor reads a floor's value: the token and the stamp, or the token
// alone (stamp 0) as version 0.1.0 wrote it. It reports false for
// anything else.
func parseFloor(b []byte) (tok fence.Token, stamp int64, ok bool) {
	switch {
	case len(b) == TokenDigits:
		tok, ok = parseToken(string(b))
		return tok, 0, ok
	case len(b) == floorLen && b[TokenDigits] == ':':
		if tok, ok = parseToken(string(b[:TokenDigits])); !ok {
			return 0, 0, false
		}
		for _, c := range b[TokenDigits+1:] {
			if c < '0' || c > '9' {
				return 0, 0, false
			}
		}
		stamp, err := strconv.ParseInt(string(b[TokenDigits+1:]), 10, 64)
		return tok, stamp, err == nil
	}
	return 0, 0, false
}

// floorToken reads the token of a floor key's value, as parseFloor.
func floorToken(kv *mvccpb.KeyValue) (fence.Token, bool) {
	tok, _, ok := parseFloor(kv.Value)
	return tok, ok
}

// aboveToken reports whether a floor refuses token: its token is higher,
// or it is not a floor this package wrote (which staleError reports).
func aboveToken(floor *mvccpb.KeyValue, token fence.Token) bool {
	tok, ok := floorToken(floor)
	return !ok || tok > token
}
