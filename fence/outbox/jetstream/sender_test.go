package jetstream_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/fence/outbox/jetstream"
	"github.com/fencelock/fencelock/fence/propagate"
	"github.com/fencelock/fencelock/internal/testkit/natstest"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// newStream creates, on the shared server, a stream capturing subjects
// "NAME.>" (NAME from the test's name), deleted when t ends.
func newStream(t *testing.T, js natsjs.JetStream) (natsjs.Stream, string) {
	t.Helper()
	name := strings.NewReplacer("/", "_", ".", "_").Replace(t.Name())
	st, err := js.CreateStream(t.Context(), natsjs.StreamConfig{Name: name, Subjects: []string{name + ".>"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })
	return st, name
}

func msgs(t *testing.T, st natsjs.Stream) uint64 {
	t.Helper()
	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func TestNewSenderRefusesBadInput(t *testing.T) {
	var typedNil natsjs.JetStream
	for _, tc := range []struct {
		name string
		js   jetstream.Publisher
		opts []jetstream.Option
	}{
		{"nil JetStream", nil, nil},
		{"typed nil", (*fakePublisher)(nil), nil},
		{"nil interface value", typedNil, nil},
		{"nil option", &fakePublisher{}, []jetstream.Option{nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := jetstream.NewSender(tc.js, tc.opts...)
			if !errors.Is(err, fence.ErrInvalidArgument) || s != nil {
				t.Fatalf("got %v, %v, want nil and an error matching fence.ErrInvalidArgument", s, err)
			}
		})
	}
}

// TestDuplicateStoredOnce delivers one effect twice, as a dispatcher does
// after an attempt whose acknowledgement was lost: the stream stores it
// once. The control publishes the same message twice without Nats-Msg-Id:
// stored twice.
func TestDuplicateStoredOnce(t *testing.T) {
	js := natstest.New(t).JetStream(t)
	st, subj := newStream(t, js)
	s, err := jetstream.NewSender(js)
	if err != nil {
		t.Fatal(err)
	}
	e := outbox.Effect{Resource: "invoice-42", Token: 812, Seq: 0, Destination: subj + ".mail", Payload: []byte("send receipt")}
	for i := range 2 {
		if err := s.Send(t.Context(), e); err != nil {
			t.Fatalf("delivery %d: %v", i+1, err)
		}
	}
	if got := msgs(t, st); got != 1 {
		t.Fatalf("got %d messages in the stream after two deliveries of one effect, want 1", got)
	}
	e.Seq = 1 // another effect: stored
	if err := s.Send(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	if got := msgs(t, st); got != 2 {
		t.Fatalf("got %d messages after a second effect, want 2", got)
	}

	t.Run("control: without Nats-Msg-Id", func(t *testing.T) {
		for range 2 {
			if _, err := js.Publish(t.Context(), subj+".mail", []byte("send receipt")); err != nil {
				t.Fatal(err)
			}
		}
		if got := msgs(t, st); got != 4 {
			t.Fatalf("got %d messages, want 4: without the header the stream keeps both copies", got)
		}
	})
}

func TestHeaders(t *testing.T) {
	js := natstest.New(t).JetStream(t)
	st, subj := newStream(t, js)
	s, err := jetstream.NewSender(js)
	if err != nil {
		t.Fatal(err)
	}
	e := outbox.Effect{Resource: `acct "7"; eu`, Token: 9, Seq: 3, Destination: subj + ".charge", Payload: []byte("{}")}
	if err := s.Send(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	m, err := st.GetMsg(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Header.Get(nats.MsgIdHdr); got != e.Key() {
		t.Errorf("got Nats-Msg-Id %q, want %q", got, e.Key())
	}
	if got := m.Header.Get(outbox.IdempotencyHeader); got != e.Key() {
		t.Errorf("got Idempotency-Key %q, want %q", got, e.Key())
	}
	f, err := propagate.Parse(m.Header.Get(propagate.Header))
	if err != nil || f != (propagate.Fencing{Name: e.Resource, Token: e.Token}) {
		t.Errorf("got Fencing-Token %+v, %v, want %q with token %d", f, err, e.Resource, e.Token)
	}
	if string(m.Data) != "{}" || m.Subject != e.Destination {
		t.Errorf("got %q on %q, want %q on %q", m.Data, m.Subject, "{}", e.Destination)
	}
}

// TestNoStream: a subject no stream captures is parked, with a reason
// that says so; WithNoStreamRetried makes it a retried error.
func TestNoStream(t *testing.T) {
	js := natstest.New(t).JetStream(t)
	e := outbox.Effect{Resource: "r", Token: 1, Destination: "nobody.listens.here", Payload: []byte("x")}
	for _, tc := range []struct {
		name      string
		opts      []jetstream.Option
		permanent bool
	}{
		{"default: parked", nil, true},
		{"retried", []jetstream.Option{jetstream.WithNoStreamRetried(true)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := jetstream.NewSender(js, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			err = s.Send(t.Context(), e)
			if !errors.Is(err, jetstream.ErrNoStream) || outbox.IsPermanent(err) != tc.permanent {
				t.Fatalf("got %v (permanent %v), want an error matching ErrNoStream, permanent %v", err, outbox.IsPermanent(err), tc.permanent)
			}
			if !strings.Contains(err.Error(), e.Destination) || !strings.Contains(err.Error(), "create a stream") && tc.permanent {
				t.Errorf("got %q, want the subject and what to do named", err)
			}
		})
	}
}

func TestExpectStream(t *testing.T) {
	js := natstest.New(t).JetStream(t)
	_, subj := newStream(t, js)
	s, err := jetstream.NewSender(js, jetstream.WithExpectStream("ANOTHER"))
	if err != nil {
		t.Fatal(err)
	}
	err = s.Send(t.Context(), outbox.Effect{Resource: "r", Token: 1, Destination: subj + ".x"})
	if !outbox.IsPermanent(err) {
		t.Fatalf("got %v, want a permanent error: the subject's stream is not the expected one", err)
	}
}

func TestInvalidSubjectParked(t *testing.T) {
	p := &fakePublisher{}
	s, err := jetstream.NewSender(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, subj := range []string{"a..b", "a.*", "a.>", "a b", ".a", "a.", "a\tb"} {
		err := s.Send(t.Context(), outbox.Effect{Resource: "r", Token: 1, Destination: subj})
		if !errors.Is(err, jetstream.ErrInvalidSubject) || !outbox.IsPermanent(err) || !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("%q: got %v, want a permanent error matching ErrInvalidSubject", subj, err)
		}
	}
	if p.calls != 0 {
		t.Errorf("got %d publishes, want none", p.calls)
	}
}

// TestTimeoutRetried: an attempt that runs out of time is retried, not
// parked.
func TestTimeoutRetried(t *testing.T) {
	js := natstest.New(t).JetStream(t)
	_, subj := newStream(t, js)
	s, err := jetstream.NewSender(js)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err = s.Send(ctx, outbox.Effect{Resource: "r", Token: 1, Destination: subj + ".x"})
	if err == nil || outbox.IsPermanent(err) || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want a retried error matching context.Canceled", err)
	}
	p := &fakePublisher{err: context.DeadlineExceeded}
	s, _ = jetstream.NewSender(p)
	err = s.Send(t.Context(), outbox.Effect{Resource: "r", Token: 1, Destination: subj + ".x"})
	if err == nil || outbox.IsPermanent(err) {
		t.Fatalf("got %v, want a retried error", err)
	}
}

type fakePublisher struct {
	calls int
	err   error
}

func (p *fakePublisher) PublishMsg(context.Context, *nats.Msg, ...natsjs.PublishOpt) (*natsjs.PubAck, error) {
	p.calls++
	return &natsjs.PubAck{Stream: "S"}, p.err
}

// TestLostAckRetried: the stream stores a message but its acknowledgement
// never reaches the sender (lostAck publishes it without a reply subject
// and reports the wait's timeout). Send's error is one to retry, not to
// park, and the dispatcher's retry, through a healthy connection, is
// acknowledged and stored once: Nats-Msg-Id makes it a duplicate. The
// control loses the ack of a message without Nats-Msg-Id: its retry is
// stored again.
func TestLostAckRetried(t *testing.T) {
	srv := natstest.New(t)
	js := srv.JetStream(t)
	for _, control := range []bool{false, true} {
		name := "Nats-Msg-Id"
		if control {
			name = "control: without Nats-Msg-Id"
		}
		t.Run(name, func(t *testing.T) {
			st, subj := newStream(t, js)
			nc := srv.Conn(t)
			e := outbox.Effect{Resource: "invoice-7", Token: 31, Destination: subj + ".mail", Payload: []byte("send receipt")}
			send := func(p jetstream.Publisher) error {
				s, err := jetstream.NewSender(p)
				if err != nil {
					t.Fatal(err)
				}
				return s.Send(t.Context(), e)
			}
			if err := send(&lostAck{nc: nc, stripID: control}); err == nil || outbox.IsPermanent(err) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("ack lost: got %v, want a retried error matching context.DeadlineExceeded", err)
			}
			// The stream stores a core publish after the server has
			// taken it: wait for it, as a retry some time later would.
			poll.Until(t, "the stream to store the message whose ack was lost", func() bool { return msgs(t, st) == 1 })
			if err := send(&lostAck{nc: nc, stripID: control, ack: js}); err != nil {
				t.Fatalf("retry: %v", err)
			}
			want := uint64(1)
			if control {
				want = 2
			}
			if got := msgs(t, st); got != want {
				t.Fatalf("got %d messages after the retry, want %d", got, want)
			}
		})
	}
}

// lostAck is a Publisher whose acknowledgements are lost: with ack nil it
// publishes through core NATS without a reply subject (the stream stores
// the message; no ack ever comes back) and reports the wait's timeout;
// with ack set it publishes through ack, acknowledged. stripID removes
// Nats-Msg-Id first (the control).
type lostAck struct {
	nc      *nats.Conn
	stripID bool
	ack     jetstream.Publisher
}

func (p *lostAck) PublishMsg(ctx context.Context, msg *nats.Msg, opts ...natsjs.PublishOpt) (*natsjs.PubAck, error) {
	if p.stripID {
		msg.Header.Del(nats.MsgIdHdr)
	}
	if p.ack != nil {
		return p.ack.PublishMsg(ctx, msg, opts...)
	}
	if err := p.nc.PublishMsg(msg); err != nil {
		return nil, err
	}
	if err := p.nc.Flush(); err != nil {
		return nil, err
	}
	return nil, context.DeadlineExceeded
}
