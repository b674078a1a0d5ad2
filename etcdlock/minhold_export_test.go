package etcdlock

import clientv3 "go.etcd.io/etcd/client/v3"

// UnconditionalMoveForTest makes the minimum hold's move skip its compare,
// for the control run of TestMinHoldLateMoveSparesNewerAcquisition.
var UnconditionalMoveForTest = &unconditionalMove

// HoldLeaseForTest returns the ID of l's minimum hold's lease (0: none).
func HoldLeaseForTest(l *Lock) clientv3.LeaseID { return l.hold.lease }
