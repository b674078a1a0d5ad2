package dynamofence

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fencelock/fencelock/fence/outbox"
)

// ResendForTest lets the SDK resend the package's requests (its default
// retries), for the control of TestReplyLostSentOnce, and returns a
// function that undoes it.
func ResendForTest() (undo func()) {
	resendForTest.Store(true)
	return func() { resendForTest.Store(false) }
}

// KeepWriteToForTest sends the package's requests with the SDK's body as
// it is, for the control of TestLargeReplyNotLost, and returns a function
// that undoes it.
func KeepWriteToForTest() (undo func()) {
	keepWriteToForTest.Store(true)
	return func() { keepWriteToForTest.Store(false) }
}

// EffectItem returns the item o records e as, pending, for the control
// of TestOutboxStaleWriteRecordsNothing.
func (o *Outbox) EffectItem(e outbox.Effect) map[string]types.AttributeValue {
	return o.effectItem(e, position(), 0)
}
