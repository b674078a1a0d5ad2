package redisfence

// ResendForTest makes go-redis resend the scripts as it resends other
// commands (on: the control of TestReplyLostSentOnce), and returns a
// function that undoes it.
func ResendForTest() (undo func()) {
	resendForTest.Store(true)
	return func() { resendForTest.Store(false) }
}
