package nilcheck_test

import (
	"io"
	"testing"

	"github.com/fencelock/fencelock/internal/nilcheck"
)

type reader struct{}

func (*reader) Read([]byte) (int, error) { return 0, io.EOF }

func TestIsNil(t *testing.T) {
	var (
		nilReader  io.Reader
		typedNil   io.Reader = (*reader)(nil)
		nilMap     map[string]int
		nilFunc    func()
		nilChan    chan int
		nilSlice   []byte
		zeroStruct struct{}
	)
	tests := []struct {
		name string
		v    any
		want bool
	}{
		{"nil", nil, true},
		{"nil interface", nilReader, true},
		{"typed nil pointer", typedNil, true},
		{"nil map", nilMap, true},
		{"nil func", nilFunc, true},
		{"nil chan", nilChan, true},
		{"nil slice", nilSlice, true},
		{"pointer", &reader{}, false},
		{"struct", zeroStruct, false},
		{"zero int", 0, false},
		{"empty string", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nilcheck.IsNil(tt.v); got != tt.want {
				t.Fatalf("IsNil(%#v): got %v, want %v", tt.v, got, tt.want)
			}
		})
	}
}
