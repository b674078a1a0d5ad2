package etcdlock

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// MaxNameLen is the longest lock name accepted, in bytes.
const MaxNameLen = 256

// ValidateName returns the error, matching [ErrInvalidName], that Lock,
// Campaign, a Semaphore and the admin calls give for name, or nil when
// they accept it: for a program (a CLI, a config loader) that checks its
// names before it connects. It sends no request.
func ValidateName(name string) error { return validateName(name) }

// validateName rejects names that are empty, too long, or unreadable in
// logs and etcdctl output. A '/' is accepted: keys spell it escaped
// (escapeName), so that no name's keys lie in another's queue.
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
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: %q contains %q", ErrInvalidName, name, r)
		}
	}
	return nil
}

// validateOwner checks an owner (WithOwner) as validateName checks a name.
func validateOwner(owner string) error {
	switch {
	case owner == "":
		return fmt.Errorf("%w: empty owner", ErrInvalidOption)
	case len(owner) > MaxOwnerLen:
		return fmt.Errorf("%w: owner is %d bytes, longer than %d", ErrInvalidOption, len(owner), MaxOwnerLen)
	case !utf8.ValidString(owner):
		return fmt.Errorf("%w: owner %q is not valid UTF-8", ErrInvalidOption, owner)
	}
	return nil
}

// validateData checks data (WithMetadata, a Proclaim's value), what it is.
func validateData(what, data string) error {
	switch {
	case len(data) > MaxDataLen:
		return fmt.Errorf("%w: %s is %d bytes, longer than %d", ErrInvalidData, what, len(data), MaxDataLen)
	case !utf8.ValidString(data):
		return fmt.Errorf("%w: %s is not valid UTF-8 (encode binary data, e.g. in base64)", ErrInvalidData, what)
	}
	return nil
}
