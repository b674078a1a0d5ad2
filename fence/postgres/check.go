package postgres

import (
	"fmt"
	"reflect"
)

// checkDB refuses a nil handle, including a typed nil such as a nil
// *pgxpool.Pool, which would otherwise panic on first use.
func checkDB(db any) error {
	if db == nil {
		return fmt.Errorf("%w: nil DB", ErrInvalidArgument)
	}
	switch v := reflect.ValueOf(db); v.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice:
		if v.IsNil() {
			return fmt.Errorf("%w: nil %T", ErrInvalidArgument, db)
		}
	}
	return nil
}
