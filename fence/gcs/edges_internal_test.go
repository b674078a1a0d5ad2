package gcsfence

import (
	"net/http"
	"testing"

	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
)

// A *storage.Client made with storage.NewGRPCClient reports a failed
// ifGenerationMatch as a gRPC FailedPrecondition (and a missing bucket as
// NotFound), not a *googleapi.Error: status() reads 0 for them, so
// writeIf takes a lost race for an unknown outcome (and drops no retry
// into loop), and a missing bucket too.
func TestReviewGRPCStatusClassification(t *testing.T) {
	for _, c := range []struct {
		code codes.Code
		want int
	}{
		{codes.FailedPrecondition, http.StatusPreconditionFailed},
		{codes.NotFound, http.StatusNotFound},
		{codes.PermissionDenied, http.StatusForbidden},
	} {
		raw := grpcstatus.Error(c.code, "from the server")
		wrapped, _ := apierror.FromError(raw)
		for name, err := range map[string]error{"status error": raw, "apierror": wrapped} {
			if got := status(err); got != c.want {
				t.Errorf("status(%s %v) = %d, want %d: writeIf calls it an unknown outcome", name, c.code, got, c.want)
			}
		}
	}
}
