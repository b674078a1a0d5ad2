package etcdlock

import clientv3 "go.etcd.io/etcd/client/v3"

// UnconditionalMoveForTest makes the minimum hold's move of the Client it
// is given to skip its compare, for the control of the test that a late
// move spares a newer acquisition.
func UnconditionalMoveForTest() Option {
	return optionFunc(func(o *options) { o.ctl.unconditionalMove = true })
}

// HoldLeaseForTest returns the ID of l's minimum hold's lease (0: none).
func HoldLeaseForTest(l *Lock) clientv3.LeaseID { return l.hold.lease }
