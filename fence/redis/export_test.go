package redisfence

import "github.com/fencelock/fencelock/internal/outboxcodec"

// ResendForTest makes go-redis resend the scripts as it resends other
// commands (on: the control of TestReplyLostSentOnce), and returns a
// function that undoes it.
func ResendForTest() (undo func()) {
	resendForTest.Store(true)
	return func() { resendForTest.Store(false) }
}

// EncodeEffect is the encoding of an effect in the outbox's effects hash,
// for the control runs that record an effect without the fenced write.
var EncodeEffect = outboxcodec.Encode
