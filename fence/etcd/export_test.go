package etcdfence

// EncodeEffect is encodeEffect, for the control runs that write an
// effect's key without the fenced write.
var EncodeEffect = encodeEffect
