package dynamotest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"time"

	"github.com/fencelock/fencelock/internal/testkit/childproc"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// Environment variables that choose dynalite.
const (
	// EnvServer set to "dynalite" makes [Start] start dynalite instead of
	// minidyn.
	EnvServer = "FENCELOCK_DYNAMODB_SERVER"
	// EnvDynalite names dynalite's package directory (the one holding its
	// package.json); by default the one .ci/install-dynalite.sh installs.
	EnvDynalite = "FENCELOCK_DYNALITE"
)

// DynaliteVersion is the dynalite .ci/install-dynalite.sh installs.
const DynaliteVersion = "3.2.2"

// ErrNoDynalite means dynalite or node was not found.
var ErrNoDynalite = errors.New("dynamotest: dynalite not installed")

// HowToEnableDynalite says how to install dynalite.
const HowToEnableDynalite = "bash .ci/setup.sh (or .ci/install-dynalite.sh) installs node and dynalite, or set " + EnvDynalite + " to dynalite's package directory"

// launcher runs dynalite on 127.0.0.1 at the port given, with DynamoDB's
// 400 KB item limit and a new table CREATING for 100 ms (dynalite's
// command says 500: the tests wait on it the same way, three tables
// sooner), and reports "listening" when it serves. It keeps the
// server up when a client drops a request before its body is read (a
// test that cuts connections): dynalite 3.2.2 rethrows that
// ("Error: aborted", ECONNRESET) and exits.
const launcher = `
const [dir, port] = process.argv.slice(1)
process.on('uncaughtException', e => {
  if (e && (e.code === 'ECONNRESET' || e.message === 'aborted')) return
  console.error(e)
  process.exit(1)
})
require(dir)({createTableMs: 100, maxItemSizeKb: 400}).listen(+port, '127.0.0.1', () => console.log('listening ' + port))
`

// FindDynalite returns dynalite's package directory and node's path, or
// an error matching [ErrNoDynalite].
func FindDynalite() (dir, node string, err error) {
	if dir, node, err = testenv.NodePackage(EnvDynalite, "dynalite", DynaliteVersion); err != nil {
		return "", "", fmt.Errorf("%w: %v", ErrNoDynalite, err)
	}
	return dir, node, nil
}

// startDynalite starts dynalite on a free loopback port, on another if
// the port was taken meanwhile.
func startDynalite(ctx context.Context) (*Server, error) {
	dir, node, err := FindDynalite()
	if err != nil {
		return nil, err
	}
	var errs []error
	for range 3 {
		s, err := launchDynalite(ctx, node, dir)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func launchDynalite(ctx context.Context, node, dir string) (*Server, error) {
	ports, err := childproc.FreePorts(1)
	if err != nil {
		return nil, fmt.Errorf("dynamotest: %w", err)
	}
	port := strconv.Itoa(ports[0])
	p, err := childproc.Start(exec.Command(node, "-e", launcher, dir, port), nil)
	if err != nil {
		return nil, fmt.Errorf("dynamotest: dynalite: %w", err)
	}
	wait := 30 * time.Second
	if d, ok := ctx.Deadline(); ok {
		wait = time.Until(d)
	}
	if _, err := p.Next(wait, "listening"); err != nil {
		p.Kill()
		return nil, fmt.Errorf("dynamotest: dynalite did not start: %w: %s", err, p.Output())
	}
	return &Server{url: "http://127.0.0.1:" + port, name: "dynalite", proc: p}, nil
}
