package etcdlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
)

// Every error of invalid input, from every call of the public API, is one
// family: it matches its own sentinel, etcdlock.ErrInvalidArgument and
// fence.ErrInvalidArgument, so a caller tells a refused input from other
// failures with one errors.Is.
func TestInvalidInputMatchesFamily(t *testing.T) {
	cli := etcdClient(t)
	c := newLocker(t, cli)
	term := mustCampaign(t, c, "invalid-family", "")
	defer term.Resign(t.Context())
	var nilCtx context.Context
	ctx := t.Context()
	big := strings.Repeat("x", etcdlock.MaxDataLen+1)
	lead := func(context.Context, *etcdlock.Term) error { return nil }
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"Lock, nil ctx", func() error { _, err := c.Lock(nilCtx, "x"); return err }, etcdlock.ErrInvalidArgument},
		{"Run, nil lead", func() error { return c.Run(ctx, "x", "", nil) }, etcdlock.ErrInvalidArgument},
		{"Lock, empty name", func() error { _, err := c.Lock(ctx, ""); return err }, etcdlock.ErrInvalidName},
		{"TryLock, name with a newline", func() error { _, err := c.TryLock(ctx, "a\nb"); return err }, etcdlock.ErrInvalidName},
		{"Campaign, empty name", func() error { _, err := c.Campaign(ctx, "", ""); return err }, etcdlock.ErrInvalidName},
		{"Run, empty name", func() error { return c.Run(ctx, "", "", lead) }, etcdlock.ErrInvalidName},
		{"Observe, empty name", func() error { _, err := c.Observe(ctx, ""); return err }, etcdlock.ErrInvalidName},
		{"WatchStatus, empty name", func() error {
			_, err := c.WatchStatus(ctx, etcdlock.StatusScope{Names: []string{"a", ""}})
			return err
		}, etcdlock.ErrInvalidName},
		{"WatchStatus, empty prefix", func() error {
			_, err := c.WatchStatus(ctx, etcdlock.StatusScope{Names: []string{""}, Prefix: true})
			return err
		}, etcdlock.ErrInvalidName},
		{"Leader, empty name", func() error { _, err := c.Leader(ctx, ""); return err }, etcdlock.ErrInvalidName},
		{"Inspect, empty name", func() error { _, err := c.Inspect(ctx, ""); return err }, etcdlock.ErrInvalidName},
		{"Break, empty name", func() error { _, err := c.Break(ctx, "", 1); return err }, etcdlock.ErrInvalidName},
		{"Lock, metadata too long", func() error { _, err := c.Lock(ctx, "x", etcdlock.WithMetadata(big)); return err }, etcdlock.ErrInvalidData},
		{"Campaign, value not UTF-8", func() error { _, err := c.Campaign(ctx, "x", "\xff"); return err }, etcdlock.ErrInvalidData},
		{"Proclaim, value too long", func() error { return term.Proclaim(ctx, big) }, etcdlock.ErrInvalidData},
		{"New, nil Option", func() error { _, err := etcdlock.New(cli, nil); return err }, etcdlock.ErrInvalidOption},
		{"New, zero TTL", func() error { _, err := etcdlock.New(cli, etcdlock.WithTTL(0)); return err }, etcdlock.ErrInvalidOption},
		{"New, empty owner", func() error { _, err := etcdlock.New(cli, etcdlock.WithOwner("")); return err }, etcdlock.ErrInvalidOption},
		{"New, empty issuer", func() error { _, err := etcdlock.New(cli, etcdlock.WithIssuer("")); return err }, etcdlock.ErrInvalidOption},
		{"New, issuer not UTF-8", func() error { _, err := etcdlock.New(cli, etcdlock.WithIssuer("\xff")); return err }, etcdlock.ErrInvalidOption},
		{"New, negative cleanup timeout", func() error {
			_, err := etcdlock.New(cli, etcdlock.WithCleanupTimeout(-time.Second))
			return err
		}, etcdlock.ErrInvalidOption},
		{"Lock, nil LockOption", func() error { _, err := c.Lock(ctx, "x", nil); return err }, etcdlock.ErrInvalidOption},
		{"Run, nil RunOption", func() error { return c.Run(ctx, "x", "", lead, nil) }, etcdlock.ErrInvalidOption},
		{"Break, zero token", func() error { _, err := c.Break(ctx, "x", 0); return err }, fence.ErrInvalidToken},
		{"BreakElection, negative token", func() error { _, err := c.BreakElection(ctx, "x", -3); return err }, fence.ErrInvalidToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			for _, want := range []error{tt.want, etcdlock.ErrInvalidArgument, fence.ErrInvalidArgument} {
				if !errors.Is(err, want) {
					t.Errorf("got %v, want an error matching %v", err, want)
				}
			}
		})
	}
	for _, sentinel := range []error{etcdlock.ErrInvalidName, etcdlock.ErrInvalidData, etcdlock.ErrInvalidOption, etcdlock.ErrInvalidArgument} {
		if !errors.Is(sentinel, fence.ErrInvalidArgument) {
			t.Errorf("%v: got no match for fence.ErrInvalidArgument, want one", sentinel)
		}
	}
	if term.Err() != nil {
		t.Fatalf("after the invalid calls: term %v, want it held", term.Err())
	}
}

// An acquisition that fails for its context names the lock, as LockAll's
// error names its locks, and still matches the context's error; Do with a
// nil context says Do, not Lock.
func TestCancelledAcquisitionNamesTheLock(t *testing.T) {
	c := newLocker(t, etcdClient(t))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := c.Lock(ctx, "report-7")
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), `"report-7"`) {
		t.Fatalf("Lock with a cancelled context: got %v, want context.Canceled naming \"report-7\"", err)
	}
	//lint:ignore SA1012 the nil context is the test
	err = c.Do(nil, "report-7", func(context.Context, *etcdlock.Lock) error { return nil })
	if !errors.Is(err, etcdlock.ErrInvalidArgument) || !strings.Contains(err.Error(), "Do: nil context") {
		t.Fatalf("Do(nil, ...): got %v, want ErrInvalidArgument saying \"Do: nil context\"", err)
	}
}
