package pgadvisory_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/pgadvisory"
)

// Bad input is refused with ErrInvalidArgument before any I/O (the config
// names no server: a connection would fail otherwise), never a panic.
func TestBadInput(t *testing.T) {
	cfg, err := pgx.ParseConfig("postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	var nilCfg *pgx.ConnConfig
	var nilPool *pgxpool.Pool
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	for _, tt := range []struct {
		name string
		call func() error
		want error
	}{
		{"nil config", func() error { _, err := pgadvisory.Acquire(t.Context(), nilCfg, 1); return err }, pgadvisory.ErrInvalidArgument},
		//lint:ignore SA1012 a nil context is what is tested
		{"nil context", func() error { _, err := pgadvisory.TryAcquire(nil, cfg, 1); return err }, pgadvisory.ErrInvalidArgument},
		{"cancelled context", func() error { _, err := pgadvisory.Acquire(cancelled, cfg, 1); return err }, context.Canceled},
		{"nil option", func() error { _, err := pgadvisory.Acquire(t.Context(), cfg, 1, nil); return err }, pgadvisory.ErrInvalidArgument},
		{"empty sequence", func() error {
			_, err := pgadvisory.Acquire(t.Context(), cfg, 1, pgadvisory.WithSequence(nil))
			return err
		}, pgadvisory.ErrInvalidArgument},
		{"zero ping interval", func() error {
			_, err := pgadvisory.Acquire(t.Context(), cfg, 1, pgadvisory.WithPingInterval(0))
			return err
		}, pgadvisory.ErrInvalidArgument},
		{"empty issuer", func() error {
			_, err := pgadvisory.Acquire(t.Context(), cfg, 1, pgadvisory.WithIssuer(""))
			return err
		}, pgadvisory.ErrInvalidArgument},
		{"session timeout under 1ms", func() error {
			_, err := pgadvisory.Acquire(t.Context(), cfg, 1, pgadvisory.WithSessionTimeout(0))
			return err
		}, pgadvisory.ErrInvalidArgument},
		{"ping interval over half the session timeout", func() error {
			_, err := pgadvisory.Acquire(t.Context(), cfg, 1, pgadvisory.WithSessionTimeout(time.Second), pgadvisory.WithPingInterval(600*time.Millisecond))
			return err
		}, pgadvisory.ErrInvalidArgument},
		{"CreateSequence nil DB", func() error { return pgadvisory.CreateSequence(t.Context(), nilPool) }, pgadvisory.ErrInvalidArgument},
		//lint:ignore SA1012 a nil context is what is tested
		{"CreateSequence nil context", func() error { return pgadvisory.CreateSequence(nil, nilPool) }, pgadvisory.ErrInvalidArgument},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if errors.Is(tt.want, pgadvisory.ErrInvalidArgument) && !errors.Is(err, fence.ErrInvalidArgument) {
				t.Fatalf("got %v, want it to match fence.ErrInvalidArgument", err)
			}
		})
	}
}

func itoa(p uint16) string { return strconv.Itoa(int(p)) }

// port returns the port of addr (host:port).
func port(t *testing.T, addr string) uint16 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		t.Fatal(err)
	}
	return uint16(n)
}
