package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
)

// The escapes of the full-screen view (xterm's, which every terminal
// emulator in use understands): the alternate screen and a hidden cursor
// on entry, both undone on exit; the cursor home and the screen cleared
// before each frame.
const (
	enterScreen = "\x1b[?1049h\x1b[?25l"
	leaveScreen = "\x1b[?25h\x1b[?1049l"
	clearScreen = "\x1b[H\x1b[2J"
)

// redrawEvery is how often the full-screen view is redrawn without a
// change, for the QUEUED ages and the clock: from the status it has, with
// no request.
const redrawEvery = time.Second

// watchCmd is status --watch: it follows scope until SIGINT or SIGTERM,
// and then returns nil (exit status 0), the screen restored.
func watchCmd(ctx context.Context, g *globals, scope etcdlock.StatusScope, asJSON bool, out io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	locks, closeLocks, err := g.connect(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil // Ctrl-C while connecting: the user stopped it
		}
		return err
	}
	defer closeLocks()
	v := watchView{out: out, asJSON: asJSON, tty: !asJSON && isTerminal(out), exact: exact(scope),
		header: fmt.Sprintf("etcd %s   prefix %s   %s", strings.Join(g.endpoints, ","), g.prefix, scopeText(scope)),
		every:  redrawEvery}
	return watchStatus(ctx, locks, scope, v)
}

// watchView is how status --watch shows what it follows.
type watchView struct {
	out    io.Writer
	tty    bool          // a full screen, redrawn on each change and every `every`; else output per change only
	asJSON bool          // a line of JSON per change
	exact  bool          // the NAMEs are exact: empty queues go as status drops them (dropEmpty)
	header string        // the endpoints, the prefix and what is followed
	every  time.Duration // the full screen's redraw period
}

// watchStatus shows the status of scope, and again each time it changes,
// until ctx ends.
func watchStatus(ctx context.Context, locks *etcdlock.Client, scope etcdlock.StatusScope, v watchView) error {
	statuses, err := locks.WatchStatus(ctx, scope)
	if err != nil {
		return inspectFailed(err)
	}
	if v.tty {
		io.WriteString(v.out, enterScreen)
		defer io.WriteString(v.out, leaveScreen)
		t := time.NewTicker(v.every)
		defer t.Stop()
		return v.redraw(statuses, t.C)
	}
	for st := range statuses { // closed when ctx ends
		if err := v.print(st); err != nil {
			return err
		}
	}
	return nil
}

// redraw draws each status received, and the last one again at each tick,
// until statuses is closed.
func (v watchView) redraw(statuses <-chan etcdlock.Status, tick <-chan time.Time) error {
	var last *etcdlock.Status
	for {
		select {
		case st, ok := <-statuses:
			if !ok {
				return nil
			}
			last = &st
		case <-tick:
			if last == nil {
				continue
			}
		}
		if err := v.frame(*last); err != nil {
			return err
		}
	}
}

// frame draws st on the full screen, in one write.
func (v watchView) frame(st etcdlock.Status) error {
	var b bytes.Buffer
	b.WriteString(clearScreen)
	fmt.Fprintf(&b, "fencelock status --watch   %s\n", v.header)
	fmt.Fprintf(&b, "%s   rev %d   %s\n\n", time.Now().Format(time.RFC3339), st.Rev, watchState(st))
	if err := printTable(&b, v.sections(st), "GRANTED-TTL"); err != nil {
		return err
	}
	_, err := v.out.Write(b.Bytes())
	return err
}

// print prints st as a block after a line with the time and revision, or,
// with --json, as one line of JSON.
func (v watchView) print(st etcdlock.Status) error {
	now := time.Now()
	if v.asJSON {
		return json.NewEncoder(v.out).Encode(watchJSON(now, st, v.sections(st)))
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "--- %s rev %d", now.Format(time.RFC3339), st.Rev)
	if st.Err != nil { // the table is the last one printed
		fmt.Fprintf(&b, " %s\n", watchState(st))
	} else {
		b.WriteByte('\n')
		if err := printTable(&b, v.sections(st), "GRANTED-TTL"); err != nil {
			return err
		}
	}
	_, err := v.out.Write(b.Bytes())
	return err
}

// sections are the sections of st that status shows.
func (v watchView) sections(st etcdlock.Status) []etcdlock.Section {
	if v.exact {
		return dropEmpty(st.Sections)
	}
	return st.Sections
}

// watchState says whether the watch runs, or why it is reconnecting.
func watchState(st etcdlock.Status) string {
	if st.Err != nil {
		return "reconnecting: " + st.Err.Error()
	}
	return "watching"
}

// scopeText says what scope follows.
func scopeText(scope etcdlock.StatusScope) string {
	switch {
	case len(scope.Names) == 0:
		return "all names"
	case scope.Prefix:
		return "names beginning with " + strings.Join(scope.Names, ", ")
	}
	return "names " + strings.Join(scope.Names, ", ")
}

// isTerminal reports whether out is a terminal: a character device (or
// /dev/null, which takes the escapes harmlessly).
func isTerminal(out io.Writer) bool {
	f, ok := out.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
