package dynamofence

// ResendForTest lets the SDK resend the package's requests (its default
// retries), for the control of TestReplyLostSentOnce, and returns a
// function that undoes it.
func ResendForTest() (undo func()) {
	resendForTest.Store(true)
	return func() { resendForTest.Store(false) }
}
