package s3fence

import (
	"bytes"
	"errors"
	"testing"

	"github.com/fencelock/fencelock/fence"
)

// FuzzDecode: any object's bytes decode to a record, a tombstone or a
// foreign object, never a panic; what decodes encodes back to the same
// bytes.
func FuzzDecode(f *testing.F) {
	f.Add(encode(header{token: 42}, []byte("hello")))
	f.Add(encode(header{token: 7, deleted: true}, nil))
	f.Add([]byte("fencelk"))
	f.Add([]byte("plain value"))
	f.Add(append([]byte(magic), make([]byte, HeaderSize)...))
	f.Fuzz(func(t *testing.T, object []byte) {
		rec, err := Decode(object)
		switch {
		case errors.Is(err, fence.ErrNotFound), errors.Is(err, ErrForeignObject):
			return
		case err != nil:
			t.Fatalf("Decode: error %v matches neither ErrNotFound nor ErrForeignObject", err)
		}
		if !rec.Token.Valid() || len(object) < HeaderSize || !bytes.Equal(rec.Value, object[HeaderSize:]) {
			t.Fatalf("Decode(%q) = token %d, value %q", object, rec.Token, rec.Value)
		}
		h, err := decodeHeader(object)
		if err != nil {
			t.Fatal(err)
		}
		if again := encode(h, rec.Value); !bytes.Equal(again, object) {
			t.Fatalf("encode(decode(%q)) = %q", object, again)
		}
	})
}
