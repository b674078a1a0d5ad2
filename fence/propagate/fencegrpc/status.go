package fencegrpc

import (
	"errors"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/propagate"
)

// MetadataKey is the gRPC metadata key the Fencing travels under.
const MetadataKey = "fencing-token"

// Domain is the domain of the ErrorInfo detail of a status that refuses a
// call for its fencing token, and the reasons it gives.
const (
	Domain        = "fencelock"
	ReasonMissing = "FENCING_TOKEN_MISSING"
	ReasonInvalid = "FENCING_TOKEN_INVALID"
	ReasonStale   = "FENCING_TOKEN_STALE"
)

// refusal returns the status of a call refused for reason, with an
// ErrorInfo detail carrying md.
func refusal(code codes.Code, reason, msg string, md map[string]string) error {
	st := status.New(code, msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: Domain, Metadata: md}); err == nil {
		st = d
	}
	return st.Err()
}

// serverError turns a handler's error that matches fence.ErrStale, and
// has no status of its own, into an Aborted status naming the tokens
// (Aborted: "a concurrency issue such as a sequencer check failure", the
// check a fencing token is); other errors pass as they are.
func serverError(err error, f propagate.Fencing) error {
	if err == nil || !errors.Is(err, fence.ErrStale) {
		return err
	}
	if _, ok := status.FromError(err); ok {
		return err // the handler chose a status
	}
	md := map[string]string{"name": f.Name, "token": f.Token.String()}
	var se *fence.StaleError
	if errors.As(err, &se) && se.Current > 0 {
		md["current"] = se.Current.String()
	}
	return refusal(codes.Aborted, ReasonStale, err.Error(), md)
}

// statusError is a refusal for the fencing token as the client sees it: it
// keeps the status and matches what it says.
type statusError struct {
	st  *status.Status
	err error // a *fence.StaleError, or wraps propagate.ErrMissing or ErrInvalidHeader
}

func (e *statusError) Error() string              { return e.st.Err().Error() }
func (e *statusError) Unwrap() error              { return e.err }
func (e *statusError) GRPCStatus() *status.Status { return e.st }

// clientError turns a status that refuses the call for its fencing token
// (one of this package's ErrorInfo reasons) into an error that matches
// it; f is the call's Fencing (zero when it carried none). Other errors
// pass as they are.
func clientError(err error, f propagate.Fencing) error {
	st, ok := status.FromError(err)
	if err == nil || !ok {
		return err
	}
	info := errorInfo(st)
	if info == nil {
		return err
	}
	switch info.Reason {
	case ReasonStale:
		se := &fence.StaleError{Resource: f.Name, Token: f.Token}
		if n, err := strconv.ParseInt(info.Metadata["current"], 10, 64); err == nil && n > 0 {
			se.Current = fence.Token(n)
		}
		return &statusError{st: st, err: se}
	case ReasonMissing:
		return &statusError{st: st, err: propagate.ErrMissing}
	case ReasonInvalid:
		return &statusError{st: st, err: propagate.ErrInvalidHeader}
	}
	return err
}

// errorInfo returns st's ErrorInfo detail of this package's domain, or nil.
func errorInfo(st *status.Status) *errdetails.ErrorInfo {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Domain == Domain {
			return info
		}
	}
	return nil
}
