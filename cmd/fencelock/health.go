package main

import (
	"time"

	"github.com/fencelock/fencelock/etcdlock"
)

// healthSlack is how much longer than --kill-after a term's command may run
// after the term ended before --health-addr reports it.
const healthSlack = 5 * time.Second

// serveHealth serves leader health at http://addr/healthz, and returns
// the Run option that feeds it and a function that stops the server.
func serveHealth(addr string, killAfter time.Duration) (etcdlock.RunOption, func(), error) {
	grace := killAfter + healthSlack // elect stops CMD within killAfter of the term's end
	h, err := etcdlock.NewLeaderHealth(etcdlock.WithValidityTolerance(grace), etcdlock.WithStopTimeout(grace))
	if err != nil {
		return nil, nil, fail(exitUsage, "--health-addr: %v", err)
	}
	stop, err := serve(addr, "/healthz", h)
	if err != nil {
		return nil, nil, fail(exitUsage, "--health-addr %s: %v", addr, err)
	}
	return etcdlock.WithLeaderHealth(h), stop, nil
}
