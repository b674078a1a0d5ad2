package etcdfence

import "github.com/fencelock/fencelock/internal/outboxcodec"

// EncodeEffect is the encoding of an effect key's value, for the control
// runs that write an effect's key without the fenced write.
var EncodeEffect = outboxcodec.Encode

// FloorKey is the key of the floor of the dispatcher resource, which
// Settle puts, for the tests that catch its request.
func (o *Outbox) FloorKey(resource string) string { return o.floorKey(resource) }
