package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// notSent is an error pgx marks safe to retry: nothing reached the server.
type notSent struct{ err error }

func (e notSent) Error() string     { return "not sent: " + e.err.Error() }
func (e notSent) Unwrap() error     { return e.err }
func (e notSent) SafeToRetry() bool { return true }
func serverError(sev, code string) error {
	return &pgconn.PgError{Severity: sev, SeverityUnlocalized: sev, Code: code, Message: "m"}
}

// TestWriteError holds WriteError to its table: an answer the server gave
// (an ERROR) or an error raised before sending is a known failure with the
// package's sentinels; a lost answer (a broken connection, a context ended
// mid-request, a FATAL error) is an unknown outcome.
func TestWriteError(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		unknown bool
		is      []error // errors.Is must hold for each
	}{
		{name: "unique violation", err: serverError("ERROR", "23505")},
		{name: "serialization failure", err: serverError("ERROR", "40001"), is: []error{postgres.ErrRetryable}},
		{name: "missing table", err: serverError("ERROR", "42P01"), is: []error{postgres.ErrSchema}},
		{name: "row trigger's refusal", err: serverError("ERROR", "FL409"), is: []error{fence.ErrStale}},
		{name: "not sent", err: notSent{context.Canceled}, is: []error{context.Canceled}},
		{name: "commit answered with rollback", err: pgx.ErrTxCommitRollback},
		{name: "session terminated", err: serverError("FATAL", "57P01"), unknown: true, is: []error{postgres.ErrTerminated}},
		{name: "connection broke", err: io.ErrUnexpectedEOF, unknown: true, is: []error{io.ErrUnexpectedEOF}},
		{name: "context ended mid-request", err: fmt.Errorf("read: %w", context.DeadlineExceeded), unknown: true, is: []error{context.DeadlineExceeded}},
		{name: "conn closed, marked safe to retry", err: notSent{pgconn.ErrConnClosed}, unknown: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := postgres.WriteError("acct-A", 7, tt.err)
			if tt.unknown {
				fencewant.Unknown(t, err, 7)
			} else if err == nil || errors.Is(err, fence.ErrUnknownOutcome) {
				t.Fatalf("got %v, want a known failure", err)
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("got %v, want it to wrap %v", err, tt.err)
			}
			for _, want := range tt.is {
				if !errors.Is(err, want) {
					t.Errorf("got %v, want it to match %v", err, want)
				}
			}
			var pgErr *pgconn.PgError
			if wantPg := errors.As(tt.err, &pgErr); wantPg && !errors.As(err, &pgErr) {
				t.Errorf("got %v, want *pgconn.PgError reachable", err)
			}
		})
	}
	if err := postgres.WriteError("acct-A", 7, nil); err != nil {
		t.Errorf("nil: got %v, want nil", err)
	}
}
