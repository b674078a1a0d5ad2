package harness

import (
	"errors"
	"fmt"
	"io"
	"time"
)

// Config describes one run. [Short] and [Long] return the two presets.
type Config struct {
	// Seed drives every random choice of the nemesis and the workers.
	Seed int64
	// Fenced selects fenced writes; false is the control run.
	Fenced bool
	// Workers is the number of worker processes running at once.
	Workers int
	// Keys is the number of locks; each guards one resource of every kind.
	Keys int
	// WritesPerLock is how many rounds of writes (one per resource kind)
	// a worker makes while holding a lock.
	WritesPerLock int
	// FaultsPerKind is how many faults of each kind the nemesis injects
	// before the run may end.
	FaultsPerKind int
	// MinDuration is the shortest run, even when the faults are done sooner.
	MinDuration time.Duration
	// MaxDuration bounds the run; faults not injected by then are reported.
	MaxDuration time.Duration
	// TTL is the lease TTL the workers ask etcd for.
	TTL time.Duration
	// LockTimeout bounds each Lock call of a worker.
	LockTimeout time.Duration
	// Log, when set, receives the nemesis's progress lines.
	Log func(format string, args ...any)
	// Events, when set, receives every worker event as a JSON line.
	Events io.Writer
}

// Short returns the preset that runs inside CI: about a minute per run.
func Short(seed int64) Config {
	return Config{
		Seed: seed, Fenced: true, Workers: 4, Keys: 4, WritesPerLock: 3,
		FaultsPerKind: 22, MinDuration: 20 * time.Second, MaxDuration: 120 * time.Second,
		TTL: time.Second, LockTimeout: 5 * time.Second,
	}
}

// Long returns the soak preset: more workers, keys and faults.
func Long(seed int64) Config {
	c := Short(seed)
	c.Workers, c.Keys = 6, 3
	c.FaultsPerKind = 120
	c.MinDuration, c.MaxDuration = 5*time.Minute, 15*time.Minute
	return c
}

func (c *Config) validate() error {
	switch {
	case c.Workers < 2:
		return fmt.Errorf("harness: %d workers; at least 2 are needed to contend", c.Workers)
	case c.Keys < 1 || c.WritesPerLock < 1 || c.FaultsPerKind < 0:
		return errors.New("harness: Keys and WritesPerLock must be positive, FaultsPerKind not negative")
	case c.TTL < time.Second || c.LockTimeout <= 0:
		return errors.New("harness: TTL must be at least 1s and LockTimeout positive")
	case c.MaxDuration < c.MinDuration:
		return errors.New("harness: MaxDuration is shorter than MinDuration")
	}
	return nil
}

func (c *Config) logf(format string, args ...any) {
	if c.Log != nil {
		c.Log(format, args...)
	}
}
