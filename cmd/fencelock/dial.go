package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"
)

// dialCause says why etcd at eps did not answer when a plain connection to
// each endpoint (and its TLS handshake, with tlsCfg, where the client would
// do one: see endpointTLS) shows it: the etcd
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
		tlsCfg = endpointTLS(u.Scheme, tlsCfg)
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
		err = &net.OpError{Op: "TLS handshake", Net: network, Addr: conn.RemoteAddr(), Err: err}
		var rh tls.RecordHeaderError
		if errors.Is(err, io.EOF) || errors.As(err, &rh) { // a plain-HTTP etcd hangs up, or answers in plain text
			return fmt.Errorf("%w: the server does not speak TLS; for a plain-HTTP etcd, use an http:// endpoint", err)
		}
		return err
	}
	return nil
}

// endpointTLS returns the TLS configuration etcd's client uses for an
// endpoint of scheme: none for http and unix, whatever --cacert and --cert
// gave; for https and unixs, those or, without them, the system's roots.
func endpointTLS(scheme string, tlsCfg *tls.Config) *tls.Config {
	switch scheme {
	case "http", "unix":
		return nil
	case "https", "unixs":
		if tlsCfg == nil {
			return &tls.Config{}
		}
	}
	return tlsCfg
}
