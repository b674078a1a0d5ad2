// Package testkit holds nothing itself: its subpackages are the test
// infrastructure shared by the module's tests, one package per job — the
// servers (embedetcd, pgtest, s3test), the child processes
// (childproc, childtest), the faults (netproxy, reqfault), waiting for a
// condition (poll), what a test cannot run without (testenv), the shared
// assertions (fencewant, nilchecktest, oteltest) and the servers the docs'
// pages start (trypage).
//
// internal/ is split by layer, and the tree shows it:
//
//	internal/nilcheck, internal/tel  library internals: imported by etcdlock, fence, fence/postgres, fence/s3
//	internal/testkit/...             test infrastructure: imported by tests, the public test kits and the harness
//	internal/app/...                 applications: the fault harness (cmd/fencecheck, integration/)
//
// The library links no test infrastructure and no application; this
// package's test holds every library package to that, so the layering
// cannot erode silently.
package testkit
