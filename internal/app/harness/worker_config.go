package harness

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/fencelock/fencelock/internal/app/harness/check"
	"github.com/fencelock/fencelock/internal/testkit/s3test"
)

// WorkerEnv names the environment variable that makes an executable calling
// [MaybeRunWorker] run as a worker. Its value is the worker's configuration
// as JSON.
const WorkerEnv = "FENCECHECK_WORKER"

// workerConfig tells a worker process where everything is and what to do.
type workerConfig struct {
	ID     string
	Etcd   []string // the worker's own proxies, one per member
	DSN    string
	S3     s3test.Config // Bucket is versioned
	SQLite string        // the run's SQLite database file, which every worker opens
	Redis  string        // the run's redis-server, host:port
	NATS   string        // the run's nats-server, nats://host:port
	Bucket string        // the run's JetStream key-value bucket there
	Azure  azConfig      // the run's Azurite, through its proxy (azLog)
	Keys   []string
	// ResKinds are the register's resource kinds (Config.ResKinds, never
	// nil).
	ResKinds []check.ResKind
	Fenced   bool
	// NoPreempt builds the fenced PostgreSQL writes WithoutPreemption
	// (Config.WithoutPreemption).
	NoPreempt bool
	Election  bool
	Kind      string // Config.Kind
	// Fx is where an effects run's (KindEffects) outbox and receivers are.
	Fx            *fxConfig
	TTL           time.Duration
	LockTimeout   time.Duration
	WritesPerLock int
	Seed          int64
}

// MaybeRunWorker runs this process as a harness worker and exits, if
// [WorkerEnv] is set; otherwise it returns at once. Call it first thing in
// main, or from an init function of a test binary that runs [Run], so that
// the re-executed binary becomes a worker before doing anything else; and
// embedetcd.MaybeRunMember beside it, for Run's etcd members.
func MaybeRunWorker() {
	js := os.Getenv(WorkerEnv)
	if js == "" {
		return
	}
	var cfg workerConfig
	if err := json.Unmarshal([]byte(js), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "fencecheck worker:", err)
		os.Exit(2)
	}
	if err := runWorker(cfg, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "fencecheck worker %s: %v\n", cfg.ID, err)
		os.Exit(1)
	}
	os.Exit(0)
}
