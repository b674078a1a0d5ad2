package harness

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/fencelock/fencelock/internal/app/harness/check"
)

// Config describes one run. [Short] and [Long] return the two presets.
type Config struct {
	// Seed drives every random choice of the nemesis and the workers.
	Seed int64
	// Fenced selects fenced writes; false is the control run.
	Fenced bool
	// Election makes the workers candidates of one election per key, each
	// leading with etcdlock's Client.Run and writing with its term's token,
	// instead of lock holders.
	Election bool
	// Kind, when set, makes the workers take another kind of lock than
	// Lock: [KindSemaphore], [KindRW] or [KindGroup]; or run the bank workload
	// ([KindBank]) or the outbox's ([KindEffects]) instead of writing registers (set it with
	// [Config.SetKind], which sets the bank's minimums too). Not with
	// Election.
	Kind string
	// WithoutPreemption builds the fenced PostgreSQL writes with
	// postgres.WithoutPreemption: the library before issue 47, whose next
	// holder waits for a frozen older holder's open transaction as long
	// as it is frozen. The bank's liveness control sets it.
	WithoutPreemption bool
	// Freeze, when positive, is how long a pause of a fenced run freezes
	// its holder, one pause in FreezeOneIn (the seed chooses which),
	// instead of the lease and 0.5 to 1.2 s more: long enough that a next holder that waits
	// for the frozen one waits past the liveness bound (the lease and
	// 1 s; see check.Stalls).
	Freeze      time.Duration
	FreezeOneIn int
	// UntilStalled makes the nemesis go on pausing until the workers'
	// events show a stall past its bound (check.CheckLiveness): the
	// liveness control's stopping rule, as the storage's catches are the
	// safety control's.
	UntilStalled bool
	// Workers is the number of worker processes running at once.
	Workers int
	// Keys is the number of locks; each guards one resource of every kind.
	Keys int
	// ResKinds are the register's resource kinds the workers write (of
	// check.ResKinds, in its order); nil is all of them. [Short] sets
	// [ShortResKinds], [Long] all.
	ResKinds []check.ResKind
	// WritesPerLock is how many rounds of writes (one per resource kind)
	// a worker makes while holding a lock.
	WritesPerLock int
	// Until is what the run goes on until it reaches: writes accepted (and,
	// fenced, refused) and faults injected of each kind. The nemesis stops
	// injecting a kind once it has its count and MinDuration has passed
	// (and, fenced, a stale write has been refused); the workers go on
	// until the writes are there too.
	Until check.Minimums
	// MinDuration is the shortest run, even when Until is reached sooner.
	MinDuration time.Duration
	// MaxDuration caps the run: one that has not reached Until by then
	// stops, and its report says so (Report.Capped).
	MaxDuration time.Duration
	// TTL is the lease TTL the workers ask etcd for.
	TTL time.Duration
	// LockTimeout bounds each Lock call (or campaign) of a worker.
	LockTimeout time.Duration
	// Log, when set, receives the nemesis's progress lines.
	Log func(format string, args ...any)
	// Events, when set, receives every worker event as a JSON line.
	Events io.Writer
}

// The kinds of lock a run's workers may take instead of Lock (Config.Kind).
const (
	// KindSemaphore: a permit of one semaphore with a permit per key; a
	// holder writes the resources of its slot's key (slot i, key i) with
	// its token, so each resource is fenced by one slot's tokens, which
	// increase from holder to holder of the slot.
	KindSemaphore = "semaphore"
	// KindRW: a key's read/write lock, half the time as a writer, which
	// writes the key's resources with its token, half the time as a
	// reader, which only reads them: the resources are fenced by the
	// writers' tokens, each greater than every earlier holder's.
	KindRW = "rw"
	// KindGroup: the workers are members of one etcdlock.Group whose
	// partitions are the keys; each membership lasts 1 to 3 s, so the
	// group rebalances all run long. The owner of partition k writes key
	// k's resources with the partition's token, so each resource is
	// fenced by one partition's tokens, which increase from owner to
	// owner.
	KindGroup = "group"
	// KindBank: Jepsen's bank workload instead of the register. The
	// run's keys are accounts, each starting at check.BankStart in
	// every store (PostgreSQL rows, a fence/etcd Store, a fence/s3
	// Store); a holder takes two accounts' locks with LockAll and moves a
	// random amount from one to the other on every store, reading the
	// balances it computes from: fenced, with reads that claim them; in
	// the control, with plain reads before fenced writes. The checker
	// wants every acknowledged transfer reflected once and the money
	// conserved (check.CheckBank).
	KindBank = "bank"
	// KindEffects: the outbox's proof. A holder takes two accounts'
	// locks with LockAll and, in one fenced PostgreSQL transaction
	// (postgres.RunInTxAll), moves money between them and records an
	// effect for an HTTP receiver and one for a JetStream stream
	// (postgres.Outbox.Record); dispatchers (outbox.Dispatcher, as
	// partition owners of an etcdlock Group) in the worker processes
	// deliver them. The checker wants each landed transfer's effect
	// applied exactly once on each receiver and no effect of one that did
	// not land (check.CheckEffects). The control sends the effects
	// straight from the transaction, before its commit.
	KindEffects = "effects"
)

// ShortMinimums are the short mode's: what CI requires, and what the verdict
// of every run (short or long) requires.
var ShortMinimums = check.Minimums{
	Writes: 1000, PerResource: 100, RefusedOverall: 1,
	Faults: faultMinimums(func(f faultKind) int { return f.short }),
}

// BankMinimums are ShortMinimums for a bank run (KindBank): transfers
// acknowledged, over the three stores and on each, for writes. Stale
// refusals come from the KV stores (a paused holder's write is refused
// once a newer holder has claimed the account); a paused PostgreSQL
// transfer holds its rows' locks, so a newer one waits for it rather
// than being refused.
var BankMinimums = check.Minimums{
	Writes: 600, PerResource: 200, RefusedOverall: 1,
	Faults: faultMinimums(func(f faultKind) int { return f.short }),
}

// EffectsMinimums are ShortMinimums for an effects run (KindEffects):
// transfers acknowledged, each with an effect for each receiver. Stale
// refusals come from the transfers a holder paused before its
// transaction begins (one pause in two): a newer holder's transfer has
// raised an account's fence meanwhile.
var EffectsMinimums = check.Minimums{
	Writes: 300, PerResource: 300, RefusedOverall: 1,
	Faults: faultMinimums(func(f faultKind) int { return f.short }),
}

// MinimumsOf returns the minimums the verdict of a run of kind
// (Config.Kind) requires: BankMinimums for KindBank, EffectsMinimums for
// KindEffects, ShortMinimums otherwise.
func MinimumsOf(kind string) check.Minimums {
	switch kind {
	case KindBank:
		return BankMinimums
	case KindEffects:
		return EffectsMinimums
	}
	return ShortMinimums
}

// SetKind sets c.Kind to kind, and c.Until's write minimums to those of
// [MinimumsOf](kind), keeping the faults c.Until asks for. For the bank it
// also makes one pause in two of a fenced run a freeze ([Config.SetFreezes]).
func (c *Config) SetKind(kind string) {
	m := MinimumsOf(kind)
	c.Kind = kind
	c.Until.Writes, c.Until.PerResource, c.Until.RefusedOverall = m.Writes, m.PerResource, m.RefusedOverall
	if kind == KindBank {
		c.SetFreezes(2)
	}
}

// SetFreezes makes one pause in oneIn of a fenced run a freeze of three
// leases and 2 s (5 s at the presets' TTL of 1 s). In the bank, a next
// holder that waits for a holder frozen with its PostgreSQL transaction
// open, as the library did before issue 47, waits about 3.7 s from its
// lock, past the liveness bound of the lease and 1 s; one that ends it
// (fence/postgres's preemption) waits about 100 ms, also when the frozen
// transfer's two tokens straddle its own (docs/harness.md).
func (c *Config) SetFreezes(oneIn int) {
	c.Freeze, c.FreezeOneIn = 3*c.TTL+2*time.Second, oneIn
}

// LivenessMinimums are what the bank's liveness control goes on until
// (see [LivenessControl]): a few transfers on every store, and two
// pauses; no other fault.
var LivenessMinimums = check.Minimums{
	Writes: 30, PerResource: 10,
	Faults: faultMinimums(func(f faultKind) int {
		if f.kind == faultPause {
			return 2
		}
		return 0
	}),
}

// LivenessControl returns c, a bank run's configuration (SetKind(KindBank)),
// as its liveness control: fenced, with the PostgreSQL writes built
// WithoutPreemption (the library before issue 47), pausing only, every
// pause a freeze, until the events show a stall past its bound
// (UntilStalled) and the run has [LivenessMinimums], capped at maxDur. Its
// checker must find that stall and no safety violation
// (check.LivenessVerdict).
func LivenessControl(c Config, maxDur time.Duration) Config {
	c.Fenced, c.WithoutPreemption, c.UntilStalled = true, true, true
	c.SetFreezes(1)
	c.Until = LivenessMinimums
	c.MinDuration, c.MaxDuration = 0, maxDur
	return c
}

// ShortResKinds are the register's resource kinds of a short run: all
// but the JetStream and Azure ones, which long runs ([Long]) write too.
// With JetStream alone added, a short pair took 111 s where it took 63 s
// without (seed 424242, docs/harness.md): the control goes on until it
// has caught a stale write on every kind.
var ShortResKinds = []check.ResKind{check.ResRow, check.ResTx, check.ResS3, check.ResEtcd, check.ResSQL, check.ResRedis}

// Short returns the preset that runs inside CI: each run goes on until it
// reaches [ShortMinimums] (about a minute on a loaded 2-core machine),
// capped at eight minutes.
func Short(seed int64) Config {
	until := ShortMinimums
	until.Faults = faultMinimums(func(f faultKind) int { return f.short })
	return Config{
		Seed: seed, Fenced: true, Workers: 4, Keys: 4, WritesPerLock: 3, ResKinds: ShortResKinds,
		Until: until, MinDuration: 20 * time.Second, MaxDuration: 8 * time.Minute,
		TTL: time.Second, LockTimeout: 5 * time.Second,
	}
}

// Long returns the soak preset: more workers, fewer keys (more contention)
// and many more faults of each kind; 5 to 15 minutes per run.
func Long(seed int64) Config {
	c := Short(seed)
	c.Workers, c.Keys = 6, 3
	c.ResKinds = check.ResKinds
	c.Until.Faults = faultMinimums(func(f faultKind) int { return f.long })
	c.MinDuration, c.MaxDuration = 5*time.Minute, 15*time.Minute
	return c
}

func (c *Config) validate() error {
	switch {
	case c.Workers < 2:
		return fmt.Errorf("harness: %d workers; at least 2 are needed to contend", c.Workers)
	case c.Keys < 1 || c.WritesPerLock < 1:
		return errors.New("harness: Keys and WritesPerLock must be positive")
	case c.TTL < time.Second || c.LockTimeout <= 0:
		return errors.New("harness: TTL must be at least 1s and LockTimeout positive")
	case c.Kind != "" && c.Kind != KindSemaphore && c.Kind != KindRW && c.Kind != KindGroup && c.Kind != KindBank && c.Kind != KindEffects:
		return fmt.Errorf("harness: Kind %q; want %q, %q, %q, %q, %q or none", c.Kind, KindSemaphore, KindRW, KindGroup, KindBank, KindEffects)
	case (c.Kind == KindBank || c.Kind == KindEffects) && c.Keys < 2:
		return fmt.Errorf("harness: %d keys; the %s workload needs at least 2 accounts", c.Keys, c.Kind)
	case c.Kind != "" && c.Election:
		return errors.New("harness: Kind and Election exclude each other")
	case c.Freeze < 0 || c.Freeze > 0 && c.FreezeOneIn < 1:
		return errors.New("harness: Freeze must not be negative, and FreezeOneIn positive when Freeze is set")
	case c.MaxDuration < c.MinDuration:
		return errors.New("harness: MaxDuration is shorter than MinDuration")
	}
	for _, k := range c.ResKinds {
		if !slices.Contains(check.ResKinds, k) {
			return fmt.Errorf("harness: ResKinds has %q; want kinds of %v", k, check.ResKinds)
		}
	}
	for _, f := range faultKinds {
		if n, ok := c.Until.Faults[f.kind]; !ok || n < 0 {
			return fmt.Errorf("harness: Until.Faults[%s] is %d (set: %v); want a count >= 0 for every kind", f.kind, n, ok)
		}
	}
	return nil
}

// resKinds returns the register's kinds of the run, in check.ResKinds'
// order.
func (c *Config) resKinds() []check.ResKind {
	if c.ResKinds == nil {
		return check.ResKinds
	}
	var ks []check.ResKind
	for _, k := range check.ResKinds {
		if slices.Contains(c.ResKinds, k) {
			ks = append(ks, k)
		}
	}
	return ks
}

func (c *Config) logf(format string, args ...any) {
	if c.Log != nil {
		c.Log(format, args...)
	}
}
