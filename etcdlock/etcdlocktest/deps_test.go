package etcdlocktest_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// etcdServer is the import path prefix of the etcd server module.
const etcdServer = "go.etcd.io/etcd/server/"

// Programs that import only etcdlock must not link the etcd server; this
// package does (the control: the check can fail).
func TestEtcdlockDoesNotLinkTheServer(t *testing.T) {
	tests := []struct {
		pkg        string
		wantServer bool
	}{
		{"github.com/fencelock/fencelock/etcdlock", false},
		{"github.com/fencelock/fencelock/etcdlock/etcdlocktest", true},
	}
	for _, tt := range tests {
		t.Run(tt.pkg, func(t *testing.T) {
			deps := goListDeps(t, tt.pkg)
			var server []string
			for _, d := range deps {
				if strings.HasPrefix(d, etcdServer) {
					server = append(server, d)
				}
			}
			if got := len(server) > 0; got != tt.wantServer {
				t.Fatalf("%s links %s: got %v (%v), want %v", tt.pkg, etcdServer, got, server, tt.wantServer)
			}
		})
	}
}

// goListDeps returns what `go list -deps pkg` prints: every package a
// program importing pkg links.
func goListDeps(t *testing.T, pkg string) []string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		testenv.Unavailable(t, "no go command in PATH: "+err.Error(), "put the go tool on PATH")
	}
	out, err := exec.CommandContext(t.Context(), gobin, "list", "-deps", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}
