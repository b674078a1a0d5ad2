// Package nilcheck tells whether a value passed as an interface is nil, or
// holds a nil pointer, map, slice, func or channel: a typed nil, such as the
// *pgxpool.Pool left by an ignored error, which compares unequal to nil and
// panics on first use. The house rule it serves is in CONTRIBUTING.md ("Nil
// arguments"): such a value gives an error matching the package's sentinel,
// never a panic, before any I/O.
//
// It uses only the standard library, so that package fence may import it.
package nilcheck

import "reflect"

// IsNil reports whether v is nil or an interface value holding a nil
// pointer, map, slice, func or channel.
func IsNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return rv.IsNil()
	}
	return false
}
