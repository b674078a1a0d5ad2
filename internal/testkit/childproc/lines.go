package childproc

import (
	"fmt"
	"sync"
	"time"
)

// queueMax bounds the stdout lines kept for Next: a chatty server whose
// output nobody reads keeps only its latest lines.
const queueMax = 1024

// lineQueue holds the stdout lines of a Proc started without a line
// handler until Next reads them.
type lineQueue struct {
	mu    sync.Mutex
	lines []string
	more  chan struct{} // a line was pushed since the last pop
}

func newLineQueue() *lineQueue { return &lineQueue{more: make(chan struct{}, 1)} }

func (q *lineQueue) push(line string) {
	q.mu.Lock()
	if len(q.lines) == queueMax {
		q.lines = q.lines[1:]
	}
	q.lines = append(q.lines, line)
	q.mu.Unlock()
	select {
	case q.more <- struct{}{}:
	default:
	}
}

func (q *lineQueue) pop() (string, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.lines) == 0 {
		return "", false
	}
	line := q.lines[0]
	q.lines = q.lines[1:]
	return line, true
}

func (q *lineQueue) empty() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.lines) == 0
}

// Next returns the payload of the process's next report with the given
// word (see [Report]), skipping other lines. It fails if the process exits
// first, if none comes within timeout, or if [Start] was given a line
// handler (which then gets the lines instead).
func (p *Proc) Next(timeout time.Duration, word string) (string, error) {
	if p.lines == nil {
		return "", fmt.Errorf("childproc: Next: %s's lines go to its line handler", p.Name())
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		if line, ok := p.lines.pop(); ok {
			if w, payload := ParseReport([]byte(line)); w == word {
				return payload, nil
			}
			continue
		}
		select {
		case <-p.lines.more:
		case <-p.exited:
			if !p.lines.empty() { // pushed before the exit
				continue
			}
			return "", fmt.Errorf("childproc: %s exited (%v) without reporting %s; output: %s", p.Name(), p.err, word, p.Output())
		case <-t.C:
			return "", fmt.Errorf("childproc: %s reported no %s within %v; output: %s", p.Name(), word, timeout, p.Output())
		}
	}
}
