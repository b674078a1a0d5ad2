package outboxcodec_test

import (
	"errors"
	"testing"

	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/internal/outboxcodec"
)

func TestRoundTrip(t *testing.T) {
	e := outbox.Effect{Resource: "r/1", Token: 1 << 62, Seq: 7, Destination: "https://x", Payload: []byte{0, 1, 2}}
	v := outboxcodec.Encode(e, 3)
	if len(v) > outboxcodec.Size(e) {
		t.Fatalf("Encode: %d bytes, over Size's %d", len(v), outboxcodec.Size(e))
	}
	got, pos, err := outboxcodec.Decode([]byte(v))
	if err != nil || pos != 3 || got.Key() != e.Key() || got.Destination != e.Destination || string(got.Payload) != string(e.Payload) {
		t.Fatalf("Decode: got %+v, %d, %v; want %+v, 3", got, pos, err, e)
	}
	for _, bad := range []string{"", "\x02", "\x01", v[:5]} {
		if _, _, err := outboxcodec.Decode([]byte(bad)); !errors.Is(err, outboxcodec.ErrMalformed) {
			t.Fatalf("Decode(%q): got %v, want ErrMalformed", bad, err)
		}
	}
	reason, n, err := outboxcodec.DecodeMarker([]byte(outboxcodec.EncodeMarker("410", 4)))
	if err != nil || reason != "410" || n != 4 {
		t.Fatalf("DecodeMarker: got %q, %d, %v; want 410, 4", reason, n, err)
	}
}
