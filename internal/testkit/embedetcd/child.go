package embedetcd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/fencelock/fencelock/internal/testkit/childproc"
)

// MemberEnv names the environment variable that turns a process importing
// this package into a [Cluster]'s member process. Its value is the member's
// configuration as JSON; the package's init function reads it, runs the
// member and never returns.
const MemberEnv = "FENCELOCK_ETCD_MEMBER"

func init() {
	if js, ok := os.LookupEnv(MemberEnv); ok {
		os.Exit(runMember(js))
	}
}

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
