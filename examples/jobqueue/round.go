package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/fencelock/fencelock/examples/internal/story"
	"github.com/fencelock/fencelock/internal/testkit/childproc"
)

// queue is one way of draining the table.
type queue struct {
	name, title string
	victim      bool // one worker is killed in the middle of a job
}

var queues = []queue{
	{"naive", "no claim: SELECT the first unfinished job, then work on it (the control)", false},
	{"skiplocked", "SELECT … FOR UPDATE SKIP LOCKED: the row lock is the claim", true},
	{"etcdlock", fmt.Sprintf("a lock per job (etcdlock, TTL %v), the work outside the database", lockTTL), true},
}

// victimID is the worker killed in the middle of a job.
const victimID = 1

// roundResult is what one round did, read from the tables.
type roundResult struct {
	queue                     string
	runs, twice, missing      int           // rows of runs; jobs with more than one; jobs never done
	held, takenBy, victimRuns int           // the victim's job, who took it over, runs of the victim's job by the victim
	handoff                   time.Duration // from the kill to another worker taking the victim's job
}

// event is one report of a worker process, or its exit (word "EXIT").
type event struct {
	worker int
	word   string
	job    int
	at     time.Time
}

// round fills the table, lets the workers drain it, kills the victim if
// the queue has one, and checks the tables.
func (l *lessonEnv) round(ctx context.Context, q queue) (roundResult, error) {
	r := roundResult{queue: q.name}
	fmt.Fprintf(l.out, "\n=== %s\n", q.title)
	t := story.NewTimeline(l.out)
	if _, err := l.pool.Exec(ctx, `TRUNCATE jobs, runs`); err != nil {
		return r, err
	}
	if _, err := l.pool.Exec(ctx, `INSERT INTO jobs (id) SELECT generate_series(1, $1)`, jobs); err != nil {
		return r, err
	}
	events := make(chan event, 16*jobs*workers)
	procs, err := l.startWorkers(q, events)
	defer func() {
		for _, p := range procs {
			_ = p.Stop(5 * time.Second)
		}
	}()
	if err != nil {
		return r, err
	}
	t.Say("%d jobs queued, %d worker processes starting (each job takes %v)", jobs, workers, jobTime)
	f := &follower{t: t, q: q, procs: procs, r: &r}
	if err := f.follow(events); err != nil {
		return r, err
	}
	if err := l.check(ctx, &r); err != nil {
		return r, err
	}
	l.tell(t, q, r)
	return r, nil
}

// startWorkers starts the worker processes; their reports and exits go to
// events.
func (l *lessonEnv) startWorkers(q queue, events chan<- event) ([]*childproc.Proc, error) {
	var procs []*childproc.Proc
	for id := 1; id <= workers; id++ {
		cfg := workerConfig{DSN: l.dsn, Etcd: l.etcd, ID: id, Queue: q.name, Victim: q.victim && id == victimID}
		cmd, err := childproc.Reexec(envWorker, cfg)
		if err != nil {
			return procs, err
		}
		p, err := childproc.Start(cmd, func(line []byte) {
			word, payload := childproc.ParseReport(line)
			job, _ := strconv.Atoi(payload)
			events <- event{worker: id, word: word, job: job, at: time.Now()}
		})
		if err != nil {
			return procs, err
		}
		procs = append(procs, p)
		go func() {
			<-p.Exited()
			events <- event{worker: id, word: "EXIT", at: time.Now()}
		}()
	}
	return procs, nil
}

// check reads what happened from the tables.
func (l *lessonEnv) check(ctx context.Context, r *roundResult) error {
	return l.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM runs),
		(SELECT count(*) FROM (SELECT job_id FROM runs GROUP BY job_id HAVING count(*) > 1) twice),
		(SELECT count(*) FROM jobs WHERE done_at IS NULL),
		(SELECT count(*) FROM runs WHERE job_id = $1 AND worker = $2)`, r.held, victimID).
		Scan(&r.runs, &r.twice, &r.missing, &r.victimRuns)
}

// tell prints the round's outcome, as counted from the tables.
func (l *lessonEnv) tell(t *story.Timeline, q queue, r roundResult) {
	t.Say("all workers done. From the tables: %d jobs, %d runs, %d jobs ran more than once, %d never done", jobs, r.runs, r.twice, r.missing)
	switch {
	case r.twice > 0:
		t.Conclude("with no claim, workers that look at the same moment take the same job: %d jobs ran twice or more", r.twice)
	case q.name == "skiplocked":
		t.Conclude("no job ran twice, and the killed worker's half-done run was rolled back with its transaction\n"+
			"(runs of job %d by worker %d: %d). Its job was free again %s after the kill: no TTL, no lock service.", r.held, victimID, r.victimRuns, story.Ms(r.handoff))
	default:
		t.Conclude("no job ran twice; the killed worker's job waited %s for its lease (TTL %v) to run out", story.Ms(r.handoff), lockTTL)
	}
}
