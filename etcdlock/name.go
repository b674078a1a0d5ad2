package etcdlock

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// MaxNameLen is the longest lock name accepted, in bytes.
const MaxNameLen = 256

// validateName rejects names that would be ambiguous as key prefixes or
// unreadable in etcdctl output.
func validateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidName)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: %d bytes, longer than %d", ErrInvalidName, len(name), MaxNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalidName, name)
	}
	for _, r := range name {
		if r == '/' || unicode.IsControl(r) {
			return fmt.Errorf("%w: %q contains %q", ErrInvalidName, name, r)
		}
	}
	return nil
}
