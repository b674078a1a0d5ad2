package etcdfence

import "github.com/fencelock/fencelock/internal/outboxcodec"

// EncodeEffect is the encoding of an effect key's value, for the control
// runs that write an effect's key without the fenced write.
var EncodeEffect = outboxcodec.Encode
