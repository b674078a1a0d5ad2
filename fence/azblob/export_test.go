package azblobfence

// ResendForTest lets the SDK resend the package's writes (its default
// retries), for the control of TestReplyLostSentOnce, and returns a
// function that undoes it.
func ResendForTest() (undo func()) {
	resendForTest.Store(true)
	return func() { resendForTest.Store(false) }
}

// IgnoreOwnWriteForTest makes writes not recognise their own id in a blob
// they read back, for the control of TestDuplicatedWriteOnce, and returns
// a function that undoes it.
func IgnoreOwnWriteForTest() (undo func()) {
	ignoreOwnForTest.Store(true)
	return func() { ignoreOwnForTest.Store(false) }
}
