package testenv

import (
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
)

// NodePackage returns the directory of the npm package name at version,
// where the repository's .ci/install-*.sh scripts put it
// ($GOPATH/name/version/node_modules/name), or the directory the
// environment variable env names instead, and the path of node to run it
// with. It fails when either is missing; the caller says how to install
// them.
func NodePackage(env, name, version string) (dir, node string, err error) {
	dir = os.Getenv(env)
	if dir == "" {
		dir = filepath.Join(filepath.SplitList(build.Default.GOPATH)[0], name, version, "node_modules", name)
	}
	if _, err := os.Stat(filepath.Join(dir, "package.json")); err != nil {
		return "", "", err
	}
	if node, err = exec.LookPath("node"); err != nil {
		return "", "", err
	}
	return dir, node, nil
}
