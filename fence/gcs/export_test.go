package gcsfence

// ResendForTest lets the storage library resend the package's writes (its
// default retries), for the control of TestReplyLostSentOnce, and returns
// a function that undoes it.
func ResendForTest() (undo func()) {
	resendForTest.Store(true)
	return func() { resendForTest.Store(false) }
}
