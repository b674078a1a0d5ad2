package sqlcbank

import "errors"

// ErrNotFound means a fenced write matched no row because no account has
// the id. Nothing was written. It never matches fence.ErrStale: no newer
// holder refused the write. [Put] creates an account on its first write.
var ErrNotFound = errors.New("sqlcbank: no account with that id")

// ErrChanged means a fenced write matched no row, yet the account's fence,
// read right after, would have let the token in: the account was created,
// or deleted and created again, between the two statements. Nothing was
// written; running the write again is safe.
var ErrChanged = errors.New("sqlcbank: the account changed between the write and the read of its fence")

// ErrInsufficientFunds is [Withdraw]'s own refusal: the balance is below
// the amount. Nothing was written.
var ErrInsufficientFunds = errors.New("sqlcbank: insufficient funds")
