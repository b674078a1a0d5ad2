package outboxgrpc

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/fence/propagate"
)

// How a gRPC answer is kept in an [outbox.Answer]: Status is the code;
// a response's Body is the marshalled message and messageHeader its full
// name; an error's Body is its marshalled google.rpc.Status; a stale
// refusal has no body and propagate.RefusedHeader "stale; current=N".
const messageHeader = "Grpc-Message-Type"

// kept are the error codes whose answer is kept: a retry would meet the
// same (a bad request, a missing thing). The others a caller retries.
var kept = map[codes.Code]bool{
	codes.InvalidArgument: true, codes.NotFound: true, codes.AlreadyExists: true,
	codes.PermissionDenied: true, codes.FailedPrecondition: true, codes.OutOfRange: true,
	codes.Unimplemented: true, codes.Unauthenticated: true,
}

// answer returns the answer to keep for a handler's (resp, err), and
// false when none is kept.
func answer(resp any, err error) (outbox.Answer, bool) {
	if err != nil {
		if _, ok := status.FromError(err); !ok && errors.Is(err, fence.ErrStale) {
			return staleAnswer(err), true
		}
		st, _ := status.FromError(err)
		if !kept[st.Code()] {
			return outbox.Answer{}, false
		}
		b, merr := proto.Marshal(st.Proto())
		return outbox.Answer{Status: int(st.Code()), Body: b}, merr == nil
	}
	m, ok := resp.(proto.Message)
	if !ok || m == nil {
		return outbox.Answer{}, false
	}
	b, merr := proto.Marshal(m)
	h := http.Header{messageHeader: {string(m.ProtoReflect().Descriptor().FullName())}}
	return outbox.Answer{Status: int(codes.OK), Header: h, Body: b}, merr == nil
}

// staleAnswer keeps a stale refusal.
func staleAnswer(err error) outbox.Answer {
	why := "stale"
	var se *fence.StaleError
	if errors.As(err, &se) && se.Current > 0 {
		why += "; current=" + se.Current.String()
	}
	return outbox.Answer{Status: int(codes.Aborted), Header: http.Header{propagate.RefusedHeader: {why}}}
}

// replay rebuilds a kept answer for a call with fencing f.
func replay(a *outbox.Answer, f propagate.Fencing) (any, error) {
	if why := a.Header.Get(propagate.RefusedHeader); strings.HasPrefix(why, "stale") {
		se := &fence.StaleError{Resource: f.Name, Token: f.Token}
		if n, err := strconv.ParseInt(strings.TrimPrefix(why, "stale; current="), 10, 64); err == nil && n > 0 {
			se.Current = fence.Token(n)
		}
		return nil, se // fencegrpc's refusal, as the first time
	}
	if a.Omitted {
		return nil, status.Error(codes.AlreadyExists, "outboxgrpc: the call was answered before; its answer was too large to keep (outbox.WithMaxAnswer)")
	}
	if codes.Code(a.Status) != codes.OK {
		var sp spb.Status
		if err := proto.Unmarshal(a.Body, &sp); err != nil {
			return nil, status.Errorf(codes.Internal, "outboxgrpc: the kept answer does not decode: %v", err)
		}
		return nil, status.FromProto(&sp).Err()
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(a.Header.Get(messageHeader)))
	if err != nil {
		return nil, status.Errorf(codes.Internal, "outboxgrpc: the kept answer's type %q: %v", a.Header.Get(messageHeader), err)
	}
	m := mt.New().Interface()
	if err := proto.Unmarshal(a.Body, m); err != nil {
		return nil, status.Errorf(codes.Internal, "outboxgrpc: the kept answer does not decode: %v", err)
	}
	return m, nil
}
