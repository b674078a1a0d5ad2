package fence

import (
	"fmt"
	"strconv"
)

// Token is a fencing token: a number handed out with each acquisition of a
// lock that only grows, so a resource can tell an older holder from a newer
// one. etcdlock uses the lock key's create revision.
//
// The zero Token is not a valid token: every valid token is positive.
type Token int64

// Valid reports whether t can be carried into a write (t > 0).
func (t Token) Valid() bool { return t > 0 }

// Validate returns an error that wraps [ErrInvalidToken] when t is zero or
// negative, and nil otherwise. Adapters call it before any I/O.
func (t Token) Validate() error {
	if !t.Valid() {
		return fmt.Errorf("%w: %d", ErrInvalidToken, int64(t))
	}
	return nil
}

// String returns the token in decimal.
func (t Token) String() string { return strconv.FormatInt(int64(t), 10) }
