// Package netproxy is a TCP proxy on loopback for fault injection in tests:
// it forwards connections to a target and can be told to stall traffic
// (connections stay open and nothing is delivered, as in a partition; what
// was sent meanwhile arrives after Heal, as TCP would retransmit it), to
// delay it, to reset connections, or to heal.
package netproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Proxy forwards TCP connections from its own loopback address to a target.
// Its methods are safe for concurrent use.
type Proxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu     sync.Mutex
	cut    bool
	mute   bool // replies (target to client) stalled: CutReplies
	delay  time.Duration
	conns  map[net.Conn]struct{}
	healed *sync.Cond
	closed bool
}

// Start listens on a random loopback port and forwards to target.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.healed = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the proxy's address (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut stalls traffic in both directions until Heal. Connections stay open
// and nothing is delivered, so peers notice only through their own timeouts;
// data sent meanwhile is held and delivered after Heal unless Reset drops it.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
}

// CutReplies stalls traffic from the target back to its clients until
// Heal, and lets requests through: a request is applied and its reply is
// held, as when a reply is lost. Reset then drops what was held.
func (p *Proxy) CutReplies() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mute = true
}

// Delay holds every chunk of data for d before forwarding it (0 to stop).
func (p *Proxy) Delay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// Heal ends a Cut, a CutReplies and a Delay; held data then flows.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut, p.mute, p.delay = false, false, 0
	p.healed.Broadcast()
}

// Reset closes every open connection (a connection reset as peers see it).
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

// Close stops the proxy and closes all connections.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.cut, p.mute = false, false
	p.healed.Broadcast()
	p.mu.Unlock()
	err := p.ln.Close()
	p.Reset()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, u) {
			return
		}
		p.wg.Add(2)
		go p.pipe(u, c, false)
		go p.pipe(c, u, true)
	}
}

func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

// pipe copies src to dst, honouring cuts and delays, until either side
// ends; reply is true for the target-to-client direction.
func (p *Proxy) pipe(dst, src net.Conn, reply bool) {
	defer p.wg.Done()
	defer p.untrack(dst, src)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.hold(reply) {
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return
			}
			if tc, ok := dst.(*net.TCPConn); ok {
				tc.CloseWrite()
			}
			return
		}
	}
}

// hold blocks while traffic (or, for a reply, replies) is cut and sleeps
// for the delay; it returns false once the proxy is closed.
func (p *Proxy) hold(reply bool) bool {
	p.mu.Lock()
	for (p.cut || reply && p.mute) && !p.closed {
		p.healed.Wait()
	}
	d, closed := p.delay, p.closed
	p.mu.Unlock()
	if d > 0 {
		time.Sleep(d)
	}
	return !closed
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(p.conns, c)
	}
}
