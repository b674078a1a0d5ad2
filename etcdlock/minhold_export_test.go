package etcdlock

// UnconditionalMoveForTest makes the minimum hold's move skip its compare,
// for the control run of TestMinHoldLateMoveSparesNewerAcquisition.
var UnconditionalMoveForTest = &unconditionalMove
