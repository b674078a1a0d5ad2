package embedetcd

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// A member whose client port another process took in the meantime fails
// to start with an error portTaken recognises, which StartServer answers
// with new ports (CI's fast tier failed once on "bind: address already in
// use" from a test binary running beside it).
func TestPortTakenRecognised(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mc, err := newMemberConfig("m0", filepath.Join(t.TempDir(), "m0"))
	if err != nil {
		t.Fatal(err)
	}
	mc.ClientURL = fmt.Sprintf("http://%s", l.Addr())
	mc.Initial = mc.Name + "=" + mc.PeerURL
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, err := startEmbedded(ctx, mc, config{})
	if err == nil {
		e.Close()
		t.Fatal("a member on a port held by a listener started")
	}
	if !portTaken(err) {
		t.Fatalf("portTaken(%v) = false, want true", err)
	}
	if portTaken(fmt.Errorf("embedetcd: m0 not ready: %w", context.DeadlineExceeded)) {
		t.Fatal("portTaken of a timeout = true, want false")
	}
}
