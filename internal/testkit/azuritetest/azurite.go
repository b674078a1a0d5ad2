package azuritetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/fencelock/fencelock/internal/testkit/childproc"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// EnvAzurite names Azurite's package directory (the one holding its
// package.json); by default the one .ci/install-azurite.sh installs.
const EnvAzurite = "FENCELOCK_AZURITE"

// Version is the Azurite .ci/install-azurite.sh installs.
const Version = "3.33.0"

// ErrNoAzurite means Azurite or node was not found.
var ErrNoAzurite = errors.New("azuritetest: Azurite not installed")

// HowToEnable says how to install Azurite.
const HowToEnable = "bash .ci/setup.sh (or sh .ci/install-azurite.sh) installs node and Azurite, or set " + EnvAzurite +
	" to Azurite's package directory, or " + EnvEndpoint + " to a running blob endpoint"

// Find returns Azurite's package directory and node's path, or an error
// matching [ErrNoAzurite].
func Find() (dir, node string, err error) {
	if dir, node, err = testenv.NodePackage(EnvAzurite, "azurite", Version); err != nil {
		return "", "", fmt.Errorf("%w: %v", ErrNoAzurite, err)
	}
	return dir, node, nil
}

// Args returns azurite-blob's arguments for a server on 127.0.0.1:port:
// in memory (Azurite refuses --location with it: the process's working
// directory is its workspace), taking any API version (the SDK's is newer
// than Azurite's), quiet. [Version] has no telemetry to turn off (3.34
// and later collect it unless given --disableTelemetry).
func Args(port int) []string {
	return []string{
		"--blobHost", "127.0.0.1", "--blobPort", strconv.Itoa(port),
		"--inMemoryPersistence", "--skipApiVersionCheck", "--silent",
	}
}

// startAzurite starts azurite-blob on a free loopback port, on another if
// the port was taken meanwhile.
func startAzurite(ctx context.Context) (*Server, error) {
	dir, node, err := Find()
	if err != nil {
		return nil, err
	}
	var errs []error
	for range 3 {
		s, err := launch(ctx, node, dir)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
		if !errors.Is(err, childproc.ErrExited) {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// launch runs one azurite-blob and waits until it has created [Container].
func launch(ctx context.Context, node, dir string) (*Server, error) {
	ports, err := childproc.FreePorts(1)
	if err != nil {
		return nil, fmt.Errorf("azuritetest: %w", err)
	}
	ws, err := testenv.MkdirTemp("azurite")
	if err != nil {
		return nil, fmt.Errorf("azuritetest: %w", err)
	}
	cmd := exec.Command(node, append([]string{filepath.Join(dir, "dist", "src", "blob", "main.js")}, Args(ports[0])...)...)
	cmd.Dir = ws // its workspace: nothing is written there in memory, but nothing lands in the test's directory either
	p, err := childproc.Start(cmd, nil)
	if err != nil {
		os.RemoveAll(ws)
		return nil, fmt.Errorf("azuritetest: %w", err)
	}
	s := &Server{url: "http://127.0.0.1:" + strconv.Itoa(ports[0]) + "/" + Account, key: AccountKey, proc: p, ws: ws}
	if err := p.AwaitReady(ctx, s.createContainer); err != nil {
		s.Close()
		return nil, fmt.Errorf("azuritetest: %w", err)
	}
	return s, nil
}
