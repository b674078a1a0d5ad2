// Package errfamily makes sentinel errors that belong to a family: each
// reads as its own message, matches itself, and also matches, with
// errors.Is, the error it belongs to. fencelock's invalid-input errors are
// one such family, rooted at fence.ErrInvalidArgument, so that a caller
// matches any package's refusal of its input with one errors.Is.
package errfamily

// New returns a sentinel error that reads msg and matches parent too.
func New(msg string, parent error) error { return &member{msg: msg, parent: parent} }

type member struct {
	msg    string
	parent error
}

func (e *member) Error() string { return e.msg }
func (e *member) Unwrap() error { return e.parent }
