// Command etcd is etcd's own server, built from the version of
// go.etcd.io/etcd/server/v3 this module requires (the one its tests embed),
// for running the CLI and the Quickstart against without Docker or an etcd
// release download. "go install go.etcd.io/etcd/server/v3@VERSION" does not
// work: etcd's go.mod has replace directives, which go install refuses.
//
//	go run ./docs/etcd --data-dir "$(mktemp -d)" \
//	  --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379
//
// It takes etcd's flags; --help lists them.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
