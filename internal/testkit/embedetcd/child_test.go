package embedetcd_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// A program that imports the package but does not call MaybeRunMember
// stays itself with MemberEnv set: importing does nothing. The control: the
// same program calling MaybeRunMember becomes a member, here one whose
// configuration is not JSON, so it exits with status 2 before main goes on.
func TestImportAloneIsNoMember(t *testing.T) {
	bin := buildImportOnly(t)
	tests := []struct {
		name     string
		args     []string
		wantExit int
		wantOut  string
	}{
		{"import alone", nil, 0, "main ran\n"},
		{"control: MaybeRunMember called", []string{"-call"}, 2, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), bin, tt.args...)
			cmd.Env = append(cmd.Environ(), embedetcd.MemberEnv+"=not json")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if got := cmd.ProcessState.ExitCode(); got != tt.wantExit {
				t.Fatalf("exit status: got %d (%v, stderr %q), want %d", got, err, stderr.String(), tt.wantExit)
			}
			if got := string(out); got != tt.wantOut {
				t.Errorf("stdout: got %q, want %q", got, tt.wantOut)
			}
		})
	}
}

// buildImportOnly builds testdata/importonly into a temporary directory.
func buildImportOnly(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		testenv.Unavailable(t, "no go command in PATH: "+err.Error(), "put the go tool on PATH")
	}
	bin := filepath.Join(t.TempDir(), "importonly")
	out, err := exec.CommandContext(t.Context(), gobin, "build", "-o", bin, "./testdata/importonly").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./testdata/importonly: %v\n%s", err, out)
	}
	return bin
}

// A process started as a member that went on as itself (its TestMain did
// not call MaybeRunMember) cannot start a cluster, which would re-execute
// it again without end; the error says what is missing.
func TestStartInUndivertedMemberFails(t *testing.T) {
	t.Setenv(embedetcd.MemberEnv, "{}")
	c, err := embedetcd.Start(context.Background(), t.TempDir(), 1)
	if err == nil {
		c.Close()
		t.Fatal("Start: got nil error, want one naming MaybeRunMember")
	}
	if !strings.Contains(err.Error(), "MaybeRunMember") {
		t.Errorf("Start: got %v, want an error naming MaybeRunMember", err)
	}
}
