package main

import (
	"context"
	"crypto/tls"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"
)

// dialCause says why etcd at eps did not answer when a plain connection to
// each endpoint (and its TLS handshake, with tlsCfg) shows it: the etcd
// client reports only that its context ended. It returns "" when every
// endpoint accepted the connection, for the cause is then elsewhere. The
// endpoints are tried at once, each for at most timeout.
func dialCause(ctx context.Context, eps []string, tlsCfg *tls.Config, timeout time.Duration) string {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	causes := make([]string, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Go(func() {
			if err := probe(ctx, ep, tlsCfg); err != nil {
				causes[i] = err.Error()
			}
		})
	}
	wg.Wait()
	var out []string
	for _, c := range causes {
		if c != "" {
			out = append(out, c)
		}
	}
	return strings.Join(out, "; ")
}

// probe connects to the endpoint ep, as etcd's client names them
// (host:port, http://host:port, https://host:port, unix://path).
func probe(ctx context.Context, ep string, tlsCfg *tls.Config) error {
	network, addr := "tcp", ep
	if u, err := url.Parse(ep); err == nil && strings.Contains(ep, "://") {
		network, addr = "tcp", u.Host
		if u.Scheme == "unix" || u.Scheme == "unixs" {
			network, addr = "unix", u.Host+u.Path
		}
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if tlsCfg == nil {
		return nil
	}
	cfg := tlsCfg.Clone()
	if host, _, err := net.SplitHostPort(addr); err == nil && cfg.ServerName == "" {
		cfg.ServerName = host
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		return &net.OpError{Op: "TLS handshake", Net: network, Addr: conn.RemoteAddr(), Err: err}
	}
	return nil
}
