// Package nilchecktest helps the tests of the nil rule (see
// internal/nilcheck): every exported call given a nil argument returns an
// error matching its package's ErrInvalidArgument, never panics.
package nilchecktest

import "fmt"

// NoPanic runs call and turns a panic into an error, so that a test can
// report a panicking call like any other wrong result.
func NoPanic(call func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return call()
}
