package propagate

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/fencelock/fencelock/fence"
)

// StatusStale is the status of a response that refuses a write as stale
// ([WriteStale]): 409 Conflict, the state of the resource (a newer
// holder's write) conflicting with the request's token.
const StatusStale = http.StatusConflict

// WriteStale answers a call whose write the resource refused as stale: if
// err matches [fence.ErrStale], it writes status 409 with
// "Fencing-Refused: stale" (and "; current=N" when err holds a
// [*fence.StaleError] that knows the resource's token) and err as a plain
// text body, and reports true; otherwise it writes nothing and reports
// false, and the handler goes on. A client's [CheckResponse] turns that
// response back into an error matching fence.ErrStale.
func WriteStale(w http.ResponseWriter, err error) bool {
	if !errors.Is(err, fence.ErrStale) {
		return false
	}
	why := "stale"
	var se *fence.StaleError
	if errors.As(err, &se) && se.Current > 0 {
		why += "; current=" + se.Current.String()
	}
	refuse(w, why, err)
	return true
}

// CheckResponse returns nil unless resp is a refusal of the call for its
// fencing token (it has the Fencing-Refused header), and otherwise an
// error saying why:
//
//   - stale (409, [WriteStale]): a [*fence.StaleError], matching
//     [fence.ErrStale], with the request's lock name as Resource, its token,
//     and the resource's token as Current when the service told it;
//   - missing (400): an error matching [ErrMissing];
//   - invalid (400): an error matching [ErrInvalidHeader].
//
// A response whose status is not that of the refusal its Fencing-Refused
// header names (a 202 carrying "stale", as from code that copied a
// downstream refusal's headers into its own answer) gives an error
// matching [fence.ErrUnknownOutcome], never fence.ErrStale: the status
// may say the write was taken.
//
// It reads up to 512 bytes of a refusal's body, for the error's message,
// and leaves closing the body to the caller. A nil resp gives an error
// matching [fence.ErrInvalidArgument].
func CheckResponse(resp *http.Response) error {
	if resp == nil {
		return fmt.Errorf("%w: CheckResponse: nil response", fence.ErrInvalidArgument)
	}
	why := resp.Header.Get(RefusedHeader)
	if why == "" {
		return nil
	}
	msg := body(resp)
	kind, params, _ := strings.Cut(why, ";")
	kind = strings.TrimSpace(kind)
	if want, ok := refusalStatus[kind]; ok && resp.StatusCode != want {
		// The header alone is not a refusal: code that copies a refusal's
		// headers into its own answer (forwarding a downstream call's
		// response) may still have taken the write. Reading a 2xx as
		// fence.ErrStale would tell the caller nothing changed.
		err := fmt.Errorf("%w: propagate: status %s disagrees with %s: %.32q (a refusal's status is %d)",
			fence.ErrUnknownOutcome, resp.Status, RefusedHeader, why, want)
		if msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		return err
	}
	switch kind {
	case "stale":
		se := &fence.StaleError{}
		if resp.Request != nil {
			f, _ := FromContext(resp.Request.Context())
			se.Resource, se.Token = f.Name, f.Token
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(params), "current="); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			se.Current = fence.Token(max(n, 0))
		}
		return se
	case "missing":
		return fmt.Errorf("%w (%s %s)", ErrMissing, resp.Status, msg)
	case "invalid":
		return fmt.Errorf("%w: refused by the server: %s %s", ErrInvalidHeader, resp.Status, msg)
	}
	return fmt.Errorf("propagate: refused by the server for its fencing token (%s: %.32q): %s %s", RefusedHeader, why, resp.Status, msg)
}

// refusalStatus is the status of each kind of refusal: the one table
// refuse answers from and CheckResponse checks against.
var refusalStatus = map[string]int{"stale": StatusStale, "missing": http.StatusBadRequest, "invalid": http.StatusBadRequest}

// body returns the start of a refusal's body, trimmed.
func body(resp *http.Response) string {
	if resp.Body == nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return strings.TrimSpace(string(b))
}
