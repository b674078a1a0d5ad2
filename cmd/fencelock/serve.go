package main

import (
	"context"
	"net"
	"net/http"
	"time"
)

// serve serves h at http://addr/path until the returned function is
// called (it waits for the server to stop, for at most a second). It fails
// at once when addr cannot be listened on.
func serve(addr, path string, h http.Handler) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(path, h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln) // ErrServerClosed at Shutdown; any other error leaves path unserved, which a probe or scrape shows
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-served
	}, nil
}
