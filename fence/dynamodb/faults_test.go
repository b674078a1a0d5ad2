package dynamofence_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fencelock/fencelock/fence"
	dynamofence "github.com/fencelock/fencelock/fence/dynamodb"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/httpfault"
)

// faultyClient returns a client whose requests go through f, with the
// SDK's default retries.
// faults loses the next reply or holds the next request.
type faults = httpfault.Transport

func faultyClient(t *testing.T, f *faults) *dynamodb.Client {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	f.Next = tr
	return client(t, func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: f} })
}

// A Put whose reply is lost says so (ErrUnknownOutcome) and ran once,
// though the SDK resends requests (3 attempts by default), even when a
// newer token's write lands in between. The control lets the SDK resend:
// the copy, refused by the newer floor, says stale of a write that landed.
func TestReplyLostSentOnce(t *testing.T) {
	run := func(t *testing.T) (sent int, err error) {
		var f faults
		s := mustNew(t, faultyClient(t, &f))
		other := newStore(t)
		k := fencewant.Prefix(t) + "k"
		fencewant.Put(t, s, k, 5, "a")
		f.LoseNextReply(func() { fencewant.Put(t, other, k, 9, "b") })
		before := f.Sent()
		err = s.Put(t.Context(), k, 7, []byte("c"))
		fencewant.Record(t, other, k, 9, "b")
		return f.Sent() - before, err
	}
	sent, err := run(t)
	fencewant.Unknown(t, err, 7)
	if sent != 1 {
		t.Fatalf("requests sent for the Put: %d, want 1", sent)
	}
	t.Run("control: resent", func(t *testing.T) {
		defer dynamofence.ResendForTest()()
		sent, err := run(t)
		if !errors.Is(err, fence.ErrStale) || sent < 2 {
			t.Fatalf("resent: got %v after %d requests, want ErrStale of a put that landed, after 2 or more", err, sent)
		}
	})
}

// A write held up in the network until a newer token has written is
// refused when it arrives, and changes nothing; so is a claim. The control
// sends a plain PutItem the same way: it lands over the newer write.
func TestLateRequestRefused(t *testing.T) {
	var f faults
	fc := faultyClient(t, &f)
	s := mustNew(t, fc)
	other := newStore(t)
	k := fencewant.Prefix(t) + "k"
	fencewant.Put(t, s, k, 5, "a")
	late := func(send func() error) error {
		held, release := f.HoldNextRequest()
		errc := make(chan error, 1)
		go func() { errc <- send() }()
		<-held
		fencewant.Put(t, other, k, 9, "b")
		close(release)
		return <-errc
	}
	fencewant.Stale(t, late(func() error { return s.Put(t.Context(), k, 7, []byte("late")) }), 7, shown(t, 9))
	fencewant.Record(t, other, k, 9, "b")
	fencewant.Stale(t, late(func() error { _, err := s.GetForUpdate(t.Context(), k, 8); return err }), 8, shown(t, 9))
	fencewant.Record(t, other, k, 9, "b")

	// The control: the same late write as a plain PutItem of the record
	// the Store would write, with no condition, lands over token 9's.
	err := late(func() error {
		_, err := fc.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(storeTable), Item: map[string]types.AttributeValue{
			"key": &types.AttributeValueMemberS{Value: k}, "fence_token": &types.AttributeValueMemberS{Value: "0000000000000000007"},
			"fence_value": &types.AttributeValueMemberB{Value: []byte("late")},
		}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := other.Get(t.Context(), k); err != nil || string(r.Value) != "late" {
		t.Fatalf("control: a plain PutItem held up the same way: got %q, %v; want the late write landed", r.Value, err)
	}
}
