// Package story prints the lessons the way cmd/fencedemo prints its story:
// timestamped lines from the start of each part, and conclusions.
package story

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Timeline prints lines stamped with the time since it was made. Safe for
// concurrent use.
type Timeline struct {
	mu    sync.Mutex
	out   io.Writer
	start time.Time
}

// NewTimeline returns a timeline starting now.
func NewTimeline(out io.Writer) *Timeline { return &Timeline{out: out, start: time.Now()} }

// Say prints one stamped line.
func (t *Timeline) Say(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.out, "  %6.3fs  %s\n", time.Since(t.start).Seconds(), fmt.Sprintf(format, args...))
}

// Conclude prints a conclusion, unstamped; its lines after the first are
// indented under it.
func (t *Timeline) Conclude(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	msg := strings.ReplaceAll(fmt.Sprintf(format, args...), "\n", "\n     ")
	fmt.Fprintf(t.out, "  => %s\n", msg)
}

// Ms formats d in milliseconds, for measured waits.
func Ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }
