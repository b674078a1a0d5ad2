package main

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/otheretcd"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// The CLI against every etcd server version (see otheretcd): run gives the
// child its token, --try finds a held lock held, status shows the holder,
// break frees it, elect leads.
//
//	go test -run TestCLIOnEveryEtcd ./cmd/fencelock
func TestCLIOnEveryEtcd(t *testing.T) {
	testenv.Long(t, "other etcd versions")
	otheretcd.ForEach(t, func(t *testing.T, ep string) {
		eps := []string{ep}
		code, out, stderr := result(t, fencelock(t, eps, "run", "job", "--", "sh", "-c", `echo "$FENCELOCK_TOKEN"`))
		if tok, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64); code != 0 || err != nil || tok <= 0 {
			t.Fatalf("run: exit %d, stdout %q, stderr %q", code, out, stderr)
		}

		cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		locks, err := etcdlock.New(cli, etcdlock.WithPrefix(prefix(t)), etcdlock.WithTTL(5*time.Second), etcdlock.WithOwner("other-host"))
		if err != nil {
			t.Fatal(err)
		}
		defer locks.Close(context.Background())
		l, err := locks.Lock(t.Context(), "held")
		if err != nil {
			t.Fatal(err)
		}
		if code, _, stderr := result(t, fencelock(t, eps, "run", "--try", "held", "--", "true")); code != exitNotAcquired {
			t.Fatalf("run --try of a held lock: exit %d, stderr %q", code, stderr)
		}
		code, out, stderr = result(t, fencelock(t, eps, "status", "--json", "held"))
		var st statusJSON
		if code != 0 || json.Unmarshal([]byte(out), &st) != nil || len(st.Locks) != 1 || st.Locks[0].Holder == nil ||
			st.Locks[0].Holder.Token != int64(l.Token()) || st.Locks[0].Holder.Owner != "other-host" {
			t.Fatalf("status: exit %d, stdout %q, stderr %q", code, out, stderr)
		}
		if code, out, stderr := result(t, fencelock(t, eps, "break", "held", "--token", strconv.FormatInt(int64(l.Token()), 10))); code != 0 {
			t.Fatalf("break: exit %d, stdout %q, stderr %q", code, out, stderr)
		}
		select {
		case <-l.Done():
		case <-time.After(3 * time.Second):
			t.Fatal("the broken lock's Done not closed within 3 s")
		}

		flag := tempFile(t, "led")
		cmd := fencelock(t, eps, "elect", "--value", "leader-1", "svc", "--", "sh", "-c", `echo "$FENCELOCK_TOKEN" > `+flag+`; sleep 30`)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitFile(t, flag, 10*time.Second)
		if e, err := locks.Leader(t.Context(), "svc"); err != nil || e.Data != "leader-1" {
			t.Fatalf("Leader while elect runs: %+v, %v", e, err)
		}
		cmd.Process.Signal(os.Interrupt)
		waitExit(t, cmd, 10*time.Second)
	})
}

// check tells a resource's token this etcd issued from one it never did
// (etcd replaced or restored): exit 0 and 1.
func TestCheckToken(t *testing.T) {
	locks, _ := locker(t)
	l, err := locks.Lock(t.Context(), "c")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(t.Context())
	code, out, stderr := result(t, fencelock(t, nil, "check", "--token", strconv.FormatInt(int64(l.Token()), 10)))
	if code != 0 || !strings.Contains(out, "ok:") {
		t.Fatalf("check of an issued token: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	code, _, stderr = result(t, fencelock(t, nil, "check", "--token", strconv.FormatInt(int64(l.Token())+1_000_000, 10)))
	if code != exitRegressed || !strings.Contains(stderr, "--bump-revision") {
		t.Fatalf("check of a token never issued: exit %d, stderr %q", code, stderr)
	}
	if code, _, _ := result(t, fencelock(t, nil, "check", "--token", "0")); code != exitUsage {
		t.Fatalf("check --token 0: exit %d, want %d", code, exitUsage)
	}
}
