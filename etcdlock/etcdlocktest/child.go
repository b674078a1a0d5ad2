package etcdlocktest

import "github.com/fencelock/fencelock/internal/testkit/embedetcd"

// MaybeRunMember makes this process a member of a Server started
// [WithMembers], and exits, if it was started as one: such members are the
// test binary re-executed with an environment variable
// (FENCELOCK_ETCD_MEMBER) set. In any other process it returns at once.
// A test binary whose tests use WithMembers calls it first in TestMain:
//
//	func TestMain(m *testing.M) {
//		etcdlocktest.MaybeRunMember()
//		os.Exit(m.Run())
//	}
//
// Without the call, [New] and [Start] with WithMembers fail, saying so.
// Importing this package does nothing by itself.
func MaybeRunMember() { embedetcd.MaybeRunMember() }
