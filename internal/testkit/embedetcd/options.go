package embedetcd

import (
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// Option configures a [Server] (members of a [Cluster], which run as
// processes of their own, take none yet). Options are created by the With…
// functions.
type Option interface {
	apply(*config)
}

type config struct {
	authToken    string
	authTokenTTL time.Duration
	bcryptCost   uint
	tls          *Certs
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithAuthToken sets the members' auth token provider ("simple", or
// "jwt,..." as for etcd's --auth-token) and, for simple tokens, how long a
// token lives unused (whole seconds, at least one). Default: etcd's
// ("simple", 300 s). Authentication itself is enabled through the API
// (AuthEnable), as on a production server.
func WithAuthToken(provider string, ttl time.Duration) Option {
	return optionFunc(func(c *config) { c.authToken, c.authTokenTTL = provider, ttl })
}

// WithBcryptCost sets the bcrypt cost of the members' password hashes.
// Default: etcd's (10). Tests that log in often lower it to save CPU.
func WithBcryptCost(cost uint) Option {
	return optionFunc(func(c *config) { c.bcryptCost = cost })
}

// WithClientTLS makes the members serve clients over TLS with the server
// certificate of certs, and require a client certificate signed by its CA.
// Client URLs are then https://. Default: plain HTTP.
func WithClientTLS(certs *Certs) Option {
	return optionFunc(func(c *config) { c.tls = certs })
}

func (c config) applyTo(cfg *embed.Config) {
	if c.authToken != "" {
		cfg.AuthToken = c.authToken
	}
	if c.authTokenTTL > 0 {
		cfg.AuthTokenTTL = uint(max(c.authTokenTTL/time.Second, 1))
	}
	if c.bcryptCost > 0 {
		cfg.BcryptCost = c.bcryptCost
	}
	if c.tls != nil {
		cfg.ClientTLSInfo.CertFile = c.tls.ServerCert
		cfg.ClientTLSInfo.KeyFile = c.tls.ServerKey
		cfg.ClientTLSInfo.TrustedCAFile = c.tls.CA
		cfg.ClientTLSInfo.ClientCertAuth = true
	}
}
