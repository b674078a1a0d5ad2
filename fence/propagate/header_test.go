package propagate_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/propagate"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name  string
		value string
		want  propagate.Fencing
	}{
		{"written form", `name="invoice-42"; token=812`, propagate.Fencing{Name: "invoice-42", Token: 812}},
		{"token first, no spaces", `token=812;name="invoice-42"`, propagate.Fencing{Name: "invoice-42", Token: 812}},
		{"spaces and tabs", " \tname=\"a\" \t; \ttoken=1 ", propagate.Fencing{Name: "a", Token: 1}},
		{"separators in the name", `name="a;b, c=d"; token=7`, propagate.Fencing{Name: "a;b, c=d", Token: 7}},
		{"escapes", `name="%22%5c%25/caf%C3%A9"; token=7`, propagate.Fencing{Name: `"\%/café`, Token: 7}},
		{"largest token", `name="a"; token=9223372036854775807`, propagate.Fencing{Name: "a", Token: 1<<63 - 1}},
		{"issuer", `name="a"; token=7; issuer="etcd-prod"`, propagate.Fencing{Name: "a", Token: 7, Issuer: "etcd-prod"}},
		{"issuer first, escaped", `issuer="redis:%22x%22";token=7;name="a"`, propagate.Fencing{Name: "a", Token: 7, Issuer: `redis:"x"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := propagate.Parse(tt.value)
			if err != nil || got != tt.want {
				t.Fatalf("Parse(%q): got %+v, %v; want %+v, nil", tt.value, got, err, tt.want)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	for _, v := range []string{
		``, `;`, `name="a"`, `token=1`, `name="a"; token=1;`, `name="a"; token=1; token=1`,
		`name="a"; name="a"; token=1`, `name="a"; token=1; epoch=2`, `Name="a"; token=1`,
		`name=a; token=1`, `name="a; token=1`, `name="a"; token=0`, `name="a"; token=01`,
		`name="a"; token=-1`, `name="a"; token=+1`, `name="a"; token=9223372036854775808`,
		`name="a"; token=1x`, `name=""; token=1`, `name="a\"b"; token=1`, `name="a\b"; token=1`,
		`name="%"; token=1`, `name="%4"; token=1`, `name="%zz"; token=1`, `name="%ff"; token=1`,
		`name="%0a"; token=1`, "name=\"caf\xc3\xa9\"; token=1", "name=\"a\tb\"; token=1",
		`name="a"; token=1, name="b"; token=2`, `name="a" token=1`, `name ="a"; token=1`,
		`name="a"; token=1; issuer=""`, `name="a"; token=1; issuer="x"; issuer="x"`, `name="a"; token=1; issuer=x`,
		`name="a"; token=1; Issuer="x"`, `name="a"; token=1; issuer="%0a"`, `name="a"; issuer="x"`,
		`name="` + strings.Repeat("a", 257) + `"; token=1`, `name="` + strings.Repeat("%41", 400) + `"; token=1`,
	} {
		f, err := propagate.Parse(v)
		if !errors.Is(err, propagate.ErrInvalidHeader) || !errors.Is(err, fence.ErrInvalidArgument) || f != (propagate.Fencing{}) {
			t.Errorf("Parse(%q): got %+v, %v; want the zero Fencing and ErrInvalidHeader", v, f, err)
		}
	}
}

func TestMarshal(t *testing.T) {
	f := propagate.Fencing{Name: `job "nightly"; 100% café`, Token: 812}
	b, err := f.MarshalText()
	if want := `name="job %22nightly%22; 100%25 caf%C3%A9"; token=812`; err != nil || string(b) != want {
		t.Fatalf("MarshalText: got %q, %v; want %q", b, err, want)
	}
	var g propagate.Fencing
	if err := g.UnmarshalText(b); err != nil || g != f {
		t.Fatalf("UnmarshalText: got %+v, %v; want %+v", g, err, f)
	}
	f = propagate.Fencing{Name: "a", Token: 9, Issuer: "postgres:db:public.seq; 100%"}
	b, err = f.MarshalText()
	if want := `name="a"; token=9; issuer="postgres:db:public.seq; 100%25"`; err != nil || string(b) != want {
		t.Fatalf("MarshalText with an issuer: got %q, %v; want %q", b, err, want)
	}
	if err := g.UnmarshalText(b); err != nil || g != f {
		t.Fatalf("UnmarshalText with an issuer: got %+v, %v; want %+v", g, err, f)
	}
	// Every byte of both names percent-encoded: é is two bytes.
	long := propagate.Fencing{Name: strings.Repeat("é", propagate.MaxNameLen/2), Token: 1<<63 - 1, Issuer: strings.Repeat("%", propagate.MaxNameLen)}
	if b, err := long.MarshalText(); err != nil || len(b) > propagate.MaxValueLen {
		t.Fatalf("the longest Fencing: %d bytes, %v; want at most MaxValueLen", len(b), err)
	} else if g, err := propagate.Parse(string(b)); err != nil || g != long {
		t.Fatalf("the longest Fencing read back: got %+v, %v", g, err)
	}
	for _, bad := range []propagate.Fencing{{Name: "", Token: 1}, {Name: "a", Token: 0}, {Name: "a\n", Token: 1}, {Name: "\xff", Token: 1}, {Name: "a", Token: 1, Issuer: "x\n"}} {
		if _, err := bad.MarshalText(); !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("MarshalText(%+v): got %v, want ErrInvalidArgument", bad, err)
		}
	}
}

// FuzzParse: Parse never panics, accepts only valid Fencings, and what it
// accepts it reads back the same from its written form, which is
// printable ASCII.
func FuzzParse(f *testing.F) {
	for _, s := range []string{`name="invoice-42"; token=812`, `token=1;name="%22"`, `name="a"; token=9223372036854775807`, `name="a"; token=1, x`,
		`name="a"; token=1; issuer="etcd-prod"`, `issuer="%3B";token=2;name="b"`, `name="a"; token=1; issuer=""`, `name="a"; token=1; issuer="x"; issuer="y"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got, err := propagate.Parse(v)
		if err != nil {
			if !errors.Is(err, propagate.ErrInvalidHeader) {
				t.Fatalf("Parse(%q): got %v, want ErrInvalidHeader", v, err)
			}
			return
		}
		if err := got.Validate(); err != nil {
			t.Fatalf("Parse(%q) accepted %+v: %v", v, got, err)
		}
		b, err := got.MarshalText()
		if err != nil {
			t.Fatalf("MarshalText(%+v): %v", got, err)
		}
		for _, c := range b {
			if c < 0x20 || c > 0x7e {
				t.Fatalf("MarshalText(%+v) = %q: byte %#x is not printable ASCII", got, b, c)
			}
		}
		again, err := propagate.Parse(string(b))
		if err != nil || again != got {
			t.Fatalf("Parse(MarshalText(%+v)) = %+v, %v; want the same", got, again, err)
		}
	})
}

// FuzzRoundTrip: every valid Fencing is written and read back unchanged.
func FuzzRoundTrip(f *testing.F) {
	f.Add("invoice-42", int64(812), "")
	f.Add(`a"b\c%d;e,f`, int64(1), `etcd; token=9`)
	f.Fuzz(func(t *testing.T, name string, token int64, issuer string) {
		in := propagate.Fencing{Name: name, Token: fence.Token(token), Issuer: issuer}
		b, err := in.MarshalText()
		if in.Validate() != nil {
			if err == nil {
				t.Fatalf("MarshalText(%+v): got nil, want an error", in)
			}
			return
		}
		out, perr := propagate.Parse(string(b))
		if err != nil || perr != nil || out != in {
			t.Fatalf("round trip of %+v: got %+v (%v, %v)", in, out, err, perr)
		}
	})
}

// FuzzJoined checks that two valid values joined as a proxy joins repeated
// headers (RFC 9110 §5.3: with a comma) never parse as one: the second
// call's token must not be read for the first's, nor either pass.
func FuzzJoined(f *testing.F) {
	f.Add("a", int64(1), "b", int64(2), ", ")
	f.Add(`x,"y`, int64(7), `name="z"; token=3`, int64(9), ",")
	f.Fuzz(func(t *testing.T, n1 string, t1 int64, n2 string, t2 int64, sep string) {
		a := propagate.Fencing{Name: n1, Token: fence.Token(t1)}
		b := propagate.Fencing{Name: n2, Token: fence.Token(t2)}
		if a.Validate() != nil || b.Validate() != nil || !strings.Contains(sep, ",") {
			return
		}
		for _, v := range []string{a.String() + sep + b.String(), "token=" + a.Token.String() + sep + b.String()} {
			if got, err := propagate.Parse(v); err == nil {
				t.Fatalf("Parse(%q): got %+v, want ErrInvalidHeader", v, got)
			}
		}
	})
}
