package harness

import (
	"encoding/json"
	"fmt"

	"github.com/fencelock/fencelock/internal/app/harness/check"
	"github.com/fencelock/fencelock/internal/testkit/childproc"
)

// evReport is the word of a worker's report that carries an event as JSON
// (childproc's worker protocol).
const evReport = "EVENT"

// startWorker re-executes this executable as a worker with cfg, passing every
// event it reports to onEvent (from one goroutine, in order).
func startWorker(cfg workerConfig, onEvent func(*childproc.Proc, check.Event)) (*childproc.Proc, error) {
	cmd, err := childproc.Reexec(WorkerEnv, cfg)
	if err != nil {
		return nil, err
	}
	var p *childproc.Proc
	started := make(chan struct{}) // p is set: an event can come before Start returns
	p, err = childproc.Start(cmd, func(line []byte) {
		<-started
		word, payload := childproc.ParseReport(line)
		var e check.Event
		if word == evReport && json.Unmarshal([]byte(payload), &e) == nil {
			onEvent(p, e)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("harness: starting worker %s: %w", cfg.ID, err)
	}
	close(started)
	return p, nil
}
