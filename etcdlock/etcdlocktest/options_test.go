package etcdlocktest_test

import (
	"context"
	"testing"

	"github.com/fencelock/fencelock/etcdlock/etcdlocktest"
)

func TestStartRejectsInvalidOptions(t *testing.T) {
	tests := []struct {
		name string
		opts []etcdlocktest.Option
	}{
		{"no members", []etcdlocktest.Option{etcdlocktest.WithMembers(0)}},
		{"negative members", []etcdlocktest.Option{etcdlocktest.WithMembers(-1)}},
		{"nil option", []etcdlocktest.Option{nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := etcdlocktest.Start(context.Background(), tt.opts...)
			if err == nil {
				s.Close()
				t.Fatal("Start: got nil error, want one")
			}
		})
	}
}

// Member hooks on the in-process member are a programming error.
func TestStopMemberWithoutMembersPanics(t *testing.T) {
	srv := etcdlocktest.New(t)
	defer func() {
		if recover() == nil {
			t.Fatal("StopMember: got no panic, want one")
		}
	}()
	srv.StopMember(0)
}
