// Package browser opens a page in headless Chromium, Debian's package,
// for tests that check what a person would see: the page's DOM after its
// scripts ran, the messages its console printed, and a screenshot.
package browser

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// HowToEnable says how to get the browser the tests use.
const HowToEnable = "apt-get install chromium (or bash .ci/setup.sh)"

// ErrNoBrowser means no Chromium is installed.
var ErrNoBrowser = errors.New("browser: no chromium on PATH")

// names are the executables tried, in order.
var names = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// Find returns the path of a Chromium executable, or ErrNoBrowser.
func Find() (string, error) {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", ErrNoBrowser
}

// Require returns the browser's path, or fails tb under CI=true and skips
// it elsewhere, saying how to install one.
func Require(tb testing.TB) string {
	tb.Helper()
	p, err := Find()
	if err != nil {
		testenv.NoServer(tb, err, ErrNoBrowser, HowToEnable)
	}
	return p
}

// Page is what a page showed.
type Page struct {
	// DOM is the page's document once its scripts ran (--dump-dom).
	DOM string
	// Console lists every message its console printed (Chromium logs
	// them all at one level), uncaught exceptions included.
	Console []string
}

// Open loads the file at path in headless Chromium at the given window
// size and returns its DOM after the page's scripts ran. When shot is
// not "", it also saves a PNG screenshot of the window there. fragment,
// if not "", is added to the URL after a '#'.
func Open(ctx context.Context, chromium, path, fragment, shot string, width, height int) (*Page, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	url := "file://" + abs
	if fragment != "" {
		url += "#" + fragment
	}
	profile, err := os.MkdirTemp("", "fencelock-chromium-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(profile)
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	args := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
		"--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
		"--user-data-dir=" + profile, fmt.Sprintf("--window-size=%d,%d", width, height),
		"--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000",
	}
	if shot != "" {
		args = append(args, "--screenshot="+shot)
	}
	dom, stderr, err := run(ctx, chromium, append(args, "--dump-dom", url)...)
	if err != nil {
		return nil, err
	}
	if shot != "" {
		if _, err := os.Stat(shot); err != nil {
			return nil, fmt.Errorf("browser: no screenshot written: %w", err)
		}
	}
	return &Page{DOM: dom, Console: console(stderr)}, nil
}

func run(ctx context.Context, chromium string, args ...string) (string, string, error) {
	cmd := exec.CommandContext(ctx, chromium, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return "", errb.String(), fmt.Errorf("browser: %s: %w\n%s", chromium, err, tail(errb.String(), 2000))
	}
	return out.String(), errb.String(), nil
}

// console picks the console's messages out of Chromium's log:
//
//	[pid:tid:time:INFO:CONSOLE:1] "Uncaught ReferenceError: f is not defined", source: file:///... (1)
func console(log string) []string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, ":CONSOLE") || strings.Contains(line, "CONSOLE(") {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
