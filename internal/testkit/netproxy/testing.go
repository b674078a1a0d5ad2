package netproxy

import (
	"net"
	"strconv"
	"testing"

	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// For starts a proxy to host:port, closed when tb ends, and returns it
// with its own host and port, to put in a client's configuration in place
// of the server's (pgx's ConnConfig has them apart).
func For(tb testing.TB, host string, port uint16) (p *Proxy, phost string, pport uint16) {
	tb.Helper()
	p, err := Start(net.JoinHostPort(host, strconv.Itoa(int(port))))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Close() })
	h, ps, err := net.SplitHostPort(p.Addr())
	if err != nil {
		tb.Fatal(err)
	}
	n, err := strconv.ParseUint(ps, 10, 16)
	if err != nil {
		tb.Fatal(err)
	}
	return p, h, uint16(n)
}

// LoseReplies holds the replies of p's connections from now (CutReplies)
// until applied reports that the request whose reply is held has run,
// then drops the connections with what they held (Reset) and heals: the
// request landed and its answer is lost. It returns a channel closed after
// that, also when applied never holds (the poll fails tb), so that the
// request's wait ends.
func (p *Proxy) LoseReplies(tb testing.TB, what string, applied func() bool) <-chan struct{} {
	tb.Helper()
	p.CutReplies()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer p.Heal()
		defer p.Reset()
		poll.Until(tb, what, applied)
	}()
	return done
}
