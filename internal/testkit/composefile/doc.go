// Package composefile has no code: its tests hold the repository's
// docker-compose.yml and its documentation (README.md and docs/*.md) to the
// code. The compose test loads the file with the compose specification's own
// loader (github.com/compose-spec/compose-go/v2), so it must be valid, and
// checks it against docs/compose.md: the etcd endpoints given to fencelock,
// the PostgreSQL DSN and the S3 variables exported there must reach the
// services the file starts. The page tests check every page's links (and
// that README.md links every page), the code blocks taken from files, the
// Go names, commands, flags, -run patterns, environment variables and paths
// the pages name, and that BENCHMARKS.md opens with its table of figures. They need neither Docker nor a network.
//
// The test lives in a package of its own so that the loader is linked into
// no other test binary and reaches no package a user imports.
package composefile
