package redisholder

// WithUncheckedIssueForTest issues the token without checking that the
// lock's key still holds the lock's value: the control of the tests that
// a lock lost before its token gets none.
func WithUncheckedIssueForTest() Option {
	return optionFunc(func(o *options) { o.unchecked = true })
}
