package testkit_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const module = "github.com/fencelock/fencelock/"

// isLibrary reports whether pkg (relative to the module) is part of the
// library as a program links it: a public package that is not a command, a
// program of the docs, a test kit (etcdlocktest, fencetest) or the
// integration tests, or one of the library's internals (internal/ outside
// testkit/ and app/).
func isLibrary(pkg string) bool {
	if rest, ok := strings.CutPrefix(pkg, "internal/"); ok {
		return !within(rest, "testkit") && !within(rest, "app")
	}
	return !within(pkg, "cmd") && !within(pkg, "docs") && !within(pkg, "integration") && !strings.HasSuffix(pkg, "test")
}

// within reports whether pkg is dir or below it.
func within(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

// isChecker reports whether the harness's checker, a pure function of a
// history, may link pkg: the fence vocabulary and the library's internals,
// but no other part of the harness, no lock client and no adapter.
func isChecker(pkg string) bool {
	switch pkg {
	case "internal/app/harness/check", "fence", "internal/nilcheck", "internal/errfamily", "internal/tel":
		return true
	}
	return false
}

// layerCase is a package and what of the module it may link.
type layerCase struct {
	name    string
	pkg     string
	allowed func(string) bool
	wantBad bool // the control: pkg must link something it may not
}

// The library's packages (their non-test files, and all they link) import
// no test infrastructure and no application; the checker imports nothing
// of the harness around it. The controls prove each rule can fail.
func TestLayers(t *testing.T) {
	deps := moduleDeps(t)
	var library []string
	for pkg := range deps {
		if isLibrary(pkg) {
			library = append(library, pkg)
		}
	}
	slices.Sort(library)
	if !slices.Contains(library, "fence/s3") || !slices.Contains(library, "internal/tel") {
		t.Fatalf("library packages: got %v, want fence/s3 and internal/tel among them", library)
	}
	tests := []layerCase{
		{"checker", "internal/app/harness/check", isChecker, false},
		{"control: the harness links the library", "internal/app/harness", isChecker, true},
		{"control: etcdlocktest links test infrastructure", "etcdlock/etcdlocktest", isLibrary, true},
	}
	for _, pkg := range library {
		tests = append(tests, layerCase{pkg, pkg, isLibrary, false})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, ok := deps[tt.pkg]
			if !ok {
				t.Fatalf("go list: no package %s", tt.pkg)
			}
			var bad []string
			for _, dep := range d {
				if !tt.allowed(dep) {
					bad = append(bad, dep)
				}
			}
			if got := len(bad) > 0; got != tt.wantBad {
				t.Errorf("%s links packages outside its layer: got %v %v, want %v", tt.pkg, got, bad, tt.wantBad)
			}
		})
	}
}

// moduleDeps returns, for every package of the module, the packages of the
// module it links (its non-test files' imports, transitively), all relative
// to the module.
func moduleDeps(t *testing.T) map[string][]string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		testenv.Unavailable(t, "no go command in PATH: "+err.Error(), "put the go tool on PATH")
	}
	out, err := exec.CommandContext(t.Context(), gobin, "list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", module+"...").Output()
	if err != nil {
		t.Fatalf("go list %s...: %v", module, err)
	}
	deps := make(map[string][]string)
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkg := strings.TrimPrefix(fields[0], module)
		deps[pkg] = nil
		for _, dep := range fields[1:] {
			if rel, ok := strings.CutPrefix(dep, module); ok {
				deps[pkg] = append(deps[pkg], rel)
			}
		}
	}
	return deps
}

// sdks maps each store's client library (an import path prefix) to the
// adapters that may link it: a library package links it only if it is one
// of them or imports one, so that a program links an SDK only by
// importing its adapter (go list -deps shows it).
var sdks = map[string][]string{
	"github.com/redis/go-redis/":                     {"fence/redis", "fence/redisholder"},
	"github.com/bsm/redislock":                       {"fence/redisholder"},
	"github.com/aws/aws-sdk-go-v2/service/s3":        {"fence/s3"},
	"github.com/aws/aws-sdk-go-v2/service/dynamodb":  {"fence/dynamodb"},
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/": {"fence/dynamodb"},
	"cloud.google.com/go/storage":                    {"fence/gcs"},
	"github.com/Azure/azure-sdk-for-go/":             {"fence/azblob"},
	"github.com/jackc/pgx/":                          {"fence/postgres", "fence/pgadvisory"},
	"github.com/go-sql-driver/mysql":                 {"fence/sql", "internal/sqlpreempt"}, // fence/sql's preemption, shared with fence/gorm
	"go.etcd.io/etcd/client/v3":                      {"etcdlock", "fence/etcd"},
	"github.com/nats-io/":                            {"fence/outbox/jetstream", "fence/jetstream"},
}

// TestSDKsLinkedOnlyByTheirAdapter checks that rule for every library
// package. The control checks fence/redis against a rule that gives
// go-redis to no adapter: it must be caught.
func TestSDKsLinkedOnlyByTheirAdapter(t *testing.T) {
	all := allDeps(t)
	mod := moduleDeps(t)
	offenders := func(pkg string, rules map[string][]string) []string {
		var bad []string
		for _, dep := range all[pkg] {
			for sdk, adapters := range rules {
				if !strings.HasPrefix(dep, sdk) {
					continue
				}
				ok := slices.Contains(adapters, pkg) || slices.ContainsFunc(adapters, func(a string) bool { return slices.Contains(mod[pkg], a) })
				if !ok {
					bad = append(bad, dep)
				}
			}
		}
		return bad
	}
	checked := 0
	for pkg := range mod {
		if !isLibrary(pkg) {
			continue
		}
		checked++
		if bad := offenders(pkg, sdks); len(bad) > 0 {
			t.Errorf("%s links %v, which only its adapter may link", pkg, bad)
		}
	}
	for _, pkg := range []string{"fence", "fence/redis", "fence/dynamodb", "fence/gcs", "fence/azblob", "fence/s3", "fence/postgres", "fence/sql", "etcdlock"} {
		if _, ok := mod[pkg]; !ok || !isLibrary(pkg) {
			t.Fatalf("%s: not among the library packages checked", pkg)
		}
	}
	if !slices.ContainsFunc(all["fence/redis"], func(d string) bool { return strings.HasPrefix(d, "github.com/redis/go-redis/v9") }) {
		t.Fatal("fence/redis does not link go-redis: the rule is checked against nothing")
	}
	if bad := offenders("fence/redis", map[string][]string{"github.com/redis/go-redis/": nil}); len(bad) == 0 {
		t.Fatal("control: fence/redis against a rule that gives go-redis to no adapter: not caught")
	}
	t.Logf("%d library packages checked", checked)
}

// allDeps returns, for every package of the module (relative to it), every
// package it links (full import paths).
func allDeps(t *testing.T) map[string][]string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		testenv.Unavailable(t, "no go command in PATH: "+err.Error(), "put the go tool on PATH")
	}
	out, err := exec.CommandContext(t.Context(), gobin, "list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", module+"...").Output()
	if err != nil {
		t.Fatalf("go list %s...: %v", module, err)
	}
	deps := make(map[string][]string)
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) > 0 {
			deps[strings.TrimPrefix(fields[0], module)] = fields[1:]
		}
	}
	return deps
}
