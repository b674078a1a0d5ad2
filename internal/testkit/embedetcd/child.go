package embedetcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/fencelock/fencelock/internal/testkit/childproc"
)

// MemberEnv names the environment variable that makes a process a
// [Cluster]'s member process. Its value is the member's configuration as
// JSON. [MaybeRunMember], called by the process's main or TestMain, reads
// it; importing this package alone does nothing with it.
const MemberEnv = "FENCELOCK_ETCD_MEMBER"

// MaybeRunMember runs this process as a [Cluster]'s member, and exits, if
// it was started as one ([MemberEnv] is set); otherwise it returns at once.
// Every executable that starts a Cluster re-executes itself for the
// members, so its main or TestMain calls MaybeRunMember first, before
// flags, servers or tests:
//
//	func TestMain(m *testing.M) {
//		embedetcd.MaybeRunMember()
//		goleak.VerifyTestMain(m)
//	}
//
// An executable that only runs a [Server] (one member inside the process)
// does not call it.
func MaybeRunMember() {
	if js, ok := os.LookupEnv(MemberEnv); ok {
		os.Exit(runMember(js))
	}
}

// errNotDiverted means this process was started as a member but its main
// or TestMain did not call [MaybeRunMember], and went on as itself: a
// Cluster it started would re-execute it again, without end.
var errNotDiverted = errors.New("embedetcd: this process was started as a cluster member (" + MemberEnv +
	" is set) but its main or TestMain does not call embedetcd.MaybeRunMember")

// runMember is the body of a member process: start the member, print
// [readyReport] once it serves, and run until it fails or stdin reaches EOF
// (the cluster closed it, or died: on Linux the parent-death signal kills
// the member first).
func runMember(js string) int {
	var mc memberConfig
	if err := json.Unmarshal([]byte(js), &mc); err != nil {
		fmt.Fprintln(os.Stderr, "embedetcd member:", err)
		return 2
	}
	e, err := startEmbedded(context.Background(), mc, config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := childproc.Report(os.Stdout, readyReport, mc.Name); err != nil {
		e.Close()
		return 1
	}
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	select {
	case err := <-e.Err():
		fmt.Fprintf(os.Stderr, "embedetcd member %s: %v\n", mc.Name, err)
		return 1
	case <-eof:
		return 0 // no clean shutdown: the data dir is the caller's to remove
	}
}
