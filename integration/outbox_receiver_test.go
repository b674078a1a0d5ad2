package integration_test

import (
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/fencelock/fencelock/fence/outbox"
)

// outboxReceiver answers 200 to every request and notes it: its key, the
// dispatcher process that sent it and when it came. It holds the gateAt-th
// request from another process until release is closed, after sending its
// key on gated.
type outboxReceiver struct {
	gateAt  int           // set once
	gated   chan string   // receives the held request's key
	release chan struct{} // closed by open
	once    sync.Once

	mu   sync.Mutex // guards got and others
	got  []delivery
	from int // requests from other processes
}

// delivery is one request the receiver got.
type delivery struct {
	key  string
	from int // the sender's process id
	at   time.Time
}

func newOutboxReceiver(gateAt int) *outboxReceiver {
	return &outboxReceiver{gateAt: gateAt, gated: make(chan string, 1), release: make(chan struct{})}
}

func (r *outboxReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	d := delivery{key: req.Header.Get(outbox.IdempotencyHeader), at: time.Now()}
	d.from, _ = strconv.Atoi(req.Header.Get(dispatcherHeader))
	r.mu.Lock()
	r.got = append(r.got, d)
	if d.from != os.Getpid() {
		r.from++
	}
	hold := d.from != os.Getpid() && r.from == r.gateAt
	r.mu.Unlock()
	if hold {
		r.gated <- d.key
		<-r.release
	}
	w.WriteHeader(http.StatusOK)
}

// open lets the held request, and any later one, be answered.
func (r *outboxReceiver) open() { r.once.Do(func() { close(r.release) }) }

func (r *outboxReceiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// keys returns the set of keys delivered.
func (r *outboxReceiver) keys() map[string]bool {
	out := map[string]bool{}
	for _, d := range r.deliveries() {
		out[d.key] = true
	}
	return out
}
