package propagate

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/fencelock/fencelock/fence"
)

// Header is the HTTP header a [Fencing] travels in. The gRPC interceptors
// of fence/propagate/fencegrpc use it too, lower-cased, as the metadata
// key ("fencing-token"), with the same value.
const Header = "Fencing-Token"

// MaxValueLen is the longest Fencing-Token value [Parse] reads, in bytes:
// a name and an issuer of MaxNameLen bytes each, every byte
// percent-encoded, and a token, with room to spare. Longer values are
// refused before they are read.
const MaxValueLen = 2048

// String returns f in the form of a Fencing-Token value (see [Parse]),
// valid or not; use [Fencing.MarshalText] to send it.
func (f Fencing) String() string {
	var b strings.Builder
	b.WriteString(`name=`)
	quote(&b, f.Name)
	b.WriteString(`; token=`)
	b.WriteString(strconv.FormatInt(int64(f.Token), 10))
	if f.Issuer != "" {
		b.WriteString(`; issuer=`)
		quote(&b, f.Issuer)
	}
	return b.String()
}

// quote writes s quoted and percent-encoded (see Parse).
func quote(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if literal(c) {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(b, "%%%02X", c)
		}
	}
	b.WriteByte('"')
}

// literal reports whether c stands for itself in a quoted name: printable
// ASCII but the quote, the backslash (kept out, so that no reader takes it
// for an escape) and the percent sign.
func literal(c byte) bool {
	return c >= 0x20 && c <= 0x7e && c != '"' && c != '\\' && c != '%'
}

// MarshalText returns f as a Fencing-Token value, or an error matching
// [fence.ErrInvalidArgument] when f is not valid ([Fencing.Validate]).
func (f Fencing) MarshalText() ([]byte, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return []byte(f.String()), nil
}

// UnmarshalText sets f from a Fencing-Token value, as [Parse] does; on
// error f is unchanged.
func (f *Fencing) UnmarshalText(text []byte) error {
	g, err := Parse(string(text))
	if err != nil {
		return err
	}
	*f = g
	return nil
}

// Parse reads a Fencing-Token value:
//
//	Fencing-Token: name="invoice-42"; token=812
//	Fencing-Token: name="invoice-42"; token=812; issuer="etcd-prod"
//
// Its grammar (RFC 5234 ABNF; OWS is optional spaces and tabs):
//
//	value       = OWS param OWS *( ";" OWS param OWS ) ; one name, one token, at most one issuer, any order
//	param       = "name=" DQUOTE *name-char DQUOTE / "token=" token / "issuer=" DQUOTE *name-char DQUOTE
//	name-char   = %x20-21 / %x23-24 / %x26-5B / %x5D-7E / "%" HEXDIG HEXDIG
//	token       = %x31-39 *18DIGIT                  ; 1 to 2^63-1, no leading zero
//
// The name and the issuer are quoted, and within the quotes every byte other than
// printable ASCII, and the quote, the backslash and the percent sign
// themselves, is percent-encoded (%22, %5C, %25; [Fencing.String] writes
// upper-case hex, Parse reads either case); the decoded name must be a
// valid one ([Fencing.Validate]); an empty issuer is refused (leave the
// parameter out for none). So a value is printable ASCII, fits an
// HTTP field and gRPC metadata as it is, and a name may hold any
// character, ';' and ',' included, without ambiguity.
//
// Anything else is refused with an error matching [ErrInvalidHeader]: a
// missing, repeated or unknown parameter (so that a parameter a later
// version adds is never silently dropped by a server that does not know
// it), keys in another case, a value longer than [MaxValueLen], a token of
// 0, with a sign or out of range, trailing text (such as a second value
// joined with ", " by a proxy).
func Parse(value string) (Fencing, error) {
	if len(value) > MaxValueLen {
		return Fencing{}, fmt.Errorf("%w: %d bytes, longer than %d", ErrInvalidHeader, len(value), MaxValueLen)
	}
	f, err := parse(value)
	if err != nil {
		return Fencing{}, fmt.Errorf("%w: %v in %.80q", ErrInvalidHeader, err, value)
	}
	if err := f.Validate(); err != nil {
		return Fencing{}, fmt.Errorf("%w: %w", ErrInvalidHeader, err)
	}
	return f, nil
}

// parse reads the parameters of value (see Parse); the result is not yet
// validated.
func parse(value string) (Fencing, error) {
	var f Fencing
	var haveName, haveToken, haveIssuer bool
	s := trimOWS(value)
	for {
		key, rest, ok := strings.Cut(s, "=")
		if !ok {
			return f, fmt.Errorf(`want name="..."; token=N`)
		}
		var err error
		switch {
		case key == "name" && !haveName:
			f.Name, rest, err = parseName(rest)
			haveName = true
		case key == "token" && !haveToken:
			f.Token, rest, err = parseToken(rest)
			haveToken = true
		case key == "issuer" && !haveIssuer:
			f.Issuer, rest, err = parseName(rest)
			if err == nil && f.Issuer == "" {
				err = fmt.Errorf("issuer is empty")
			}
			haveIssuer = true
		case key == "name" || key == "token" || key == "issuer":
			return f, fmt.Errorf("%s given twice", key)
		default:
			return f, fmt.Errorf("unknown parameter %.32q", key)
		}
		if err != nil {
			return f, err
		}
		s = trimOWS(rest)
		if s == "" {
			break
		}
		if s[0] != ';' {
			return f, fmt.Errorf("want ';' between parameters, got %.16q", s)
		}
		s = trimOWS(s[1:])
	}
	if !haveName || !haveToken {
		return f, fmt.Errorf("want both name and token")
	}
	return f, nil
}

// parseName reads a quoted, percent-encoded name from the start of s and
// returns it and what follows.
func parseName(s string) (string, string, error) {
	if s == "" || s[0] != '"' {
		return "", "", fmt.Errorf("name is not quoted")
	}
	var b []byte
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			if !utf8.Valid(b) {
				return "", "", fmt.Errorf("name is not UTF-8 once decoded")
			}
			return string(b), s[i+1:], nil
		case c == '%':
			if i+2 >= len(s) || unhex(s[i+1]) < 0 || unhex(s[i+2]) < 0 {
				return "", "", fmt.Errorf("bad percent-encoding in name")
			}
			b = append(b, byte(unhex(s[i+1])<<4|unhex(s[i+2])))
			i += 2
		case literal(c):
			b = append(b, c)
		default:
			return "", "", fmt.Errorf("byte %#x in name must be percent-encoded", c)
		}
	}
	return "", "", fmt.Errorf("name's closing quote missing")
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// parseToken reads a token from the start of s and returns it and what
// follows.
func parseToken(s string) (fence.Token, string, error) {
	n := 0
	for n < len(s) && '0' <= s[n] && s[n] <= '9' {
		n++
	}
	switch {
	case n == 0:
		return 0, "", fmt.Errorf("token is not a decimal number")
	case s[0] == '0':
		return 0, "", fmt.Errorf("token is 0 or has a leading zero")
	}
	v, err := strconv.ParseInt(s[:n], 10, 64)
	if err != nil {
		return 0, "", fmt.Errorf("token out of range")
	}
	return fence.Token(v), s[n:], nil
}

// trimOWS removes spaces and tabs around s.
func trimOWS(s string) string { return strings.Trim(s, " \t") }
