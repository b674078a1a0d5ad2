// Package composefile has no code: its test proves the repository's
// docker-compose.yml. The test loads the file with the compose
// specification's own loader (github.com/compose-spec/compose-go/v2), so it
// must be valid, and checks it against the README's compose section: the
// etcd endpoints given to fencelock, the PostgreSQL DSN and the S3 variables
// exported there must reach the services the file starts. It needs neither
// Docker nor a network.
//
// The test lives in a package of its own so that the loader is linked into
// no other test binary and reaches no package a user imports.
package composefile
