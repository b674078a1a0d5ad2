package composefile_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// snippetContexts are what the pages' Go snippets assume around them, by
// the name a page gives a block ("<!-- snippet: NAME -->" on the line
// before it): a file of package snippets in which SNIPPET is replaced by
// the block. A statement block runs inside a function whose parameters
// are the variables the page's prose introduces; its suffix uses what the
// block leaves unused (the page goes on with it).
var snippetContexts = map[string]string{
	"holders-require-issuer": `import (
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
)

func _(pool *pgxpool.Pool) error {
SNIPPET
	_, _ = store, pgStore
	return err
}`,
	"election-run": `import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
)

func _(ctx context.Context, cli *clientv3.Client, podName, podIP string, pool *pgxpool.Pool, jobs *postgres.Table) error {
SNIPPET
	_ = err
	return nil
}`,
	"election-health": `import (
	"context"
	"net/http"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
)

func _(ctx context.Context, locks *etcdlock.Client, podIP string, lead func(context.Context, *etcdlock.Term) error) error {
SNIPPET
	_ = err
	return nil
}`,
	"groups-join": `import (
	"context"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
)

func consume(context.Context, *etcdlock.Partition, fence.Updater) error { return nil }

func _(ctx context.Context, locks *etcdlock.Client, offsets fence.Updater) error {
SNIPPET
	return err
}`,
	"locks-transfer": `import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence/postgres"
)

func _(ctx context.Context, locks *etcdlock.Client, pool *pgxpool.Pool) error {
SNIPPET
}`,
	"operating-trylock": `import (
	"context"
	"errors"
	"log"

	"github.com/fencelock/fencelock/etcdlock"
)

func _(ctx context.Context, locks *etcdlock.Client) {
SNIPPET
}`,
	"operating-zap": `import (
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

func _(endpoints []string) {
SNIPPET
	_, _ = cli, err
}`,
	"propagation-carry": `import (
	"context"
	"net/http"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence/propagate"
	"github.com/fencelock/fencelock/fence/propagate/fencegrpc"
)

func _(ctx context.Context, lock *etcdlock.Lock, addr string, creds credentials.TransportCredentials) error {
SNIPPET
	_, _, _, _ = ctx, client, conn, err
	return nil
}`,
	"propagation-guard": `import (
	"context"
	"net/http"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/propagate"
)

func _(ctx context.Context, guard *fence.Guard, lock *etcdlock.Lock, client *http.Client, url string,
	setBalance func(context.Context, *http.Client, string, int64) error) {
SNIPPET
	_ = err
}`,
	"s3-store": `import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	s3fence "github.com/fencelock/fencelock/fence/s3"
)

func _(ctx context.Context, newS3Client func(endpoint, region, accessKey, secretKey string, optFns ...func(*s3.Options)) *s3.Client,
	createBucket func(context.Context, *s3.Client, string) error) error {
SNIPPET
	_, _ = store, err
	return nil
}`,
	"testing-worker": `import (
	"context"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/etcdlock/etcdlocktest"
)

func worker(*etcdlock.Lock) {}

SNIPPET`,
	"testing-main": `import (
	"os"
	"testing"

	"github.com/fencelock/fencelock/etcdlock/etcdlocktest"
)

SNIPPET`,
}

var (
	goBlockRe = regexp.MustCompile("(?m)^(.*)\n```go\n((?s:.*?))```\n")
	goFenceRe = regexp.MustCompile("(?m)^[ \t>]*```[ \t]*(?i:go|golang)[ \t]*$")
)

// TestPageGoSnippets compiles every Go block of README.md and the docs/
// pages, with go vet: a block taken from the repository is marked
// "<!-- file: ... -->" or "<!-- go: ... -->" (TestPageCode checks it is the
// repository's), and the package of its file is vetted; every other one is
// marked "<!-- snippet: NAME -->" and compiled in the context
// snippetContexts gives NAME. A block with neither marker fails, and so
// does a Go fence the parser does not see (indented, or tagged golang):
// its code would be checked by nothing.
func TestPageGoSnippets(t *testing.T) {
	dir, err := os.MkdirTemp(filepath.Join(repoRoot, "internal", "testkit", "composefile"), "_snippets")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	used := map[string]string{}
	vet := map[string]bool{} // the packages whose files pages show
	n := 0
	for _, p := range pages(t) {
		found := goBlockRe.FindAllStringSubmatch(p.text, -1)
		if fences := len(goFenceRe.FindAllString(p.text, -1)); fences != len(found) {
			t.Errorf("%s: %d Go fences, %d of them blocks at the start of a line tagged go: the others are checked by nothing", p.path, fences, len(found))
		}
		for _, m := range found {
			before, block := m[1], m[2]
			if pkg, ok := markedPackage(before); ok {
				vet["./"+pkg] = true
				continue
			}
			name, ok := strings.CutPrefix(before, "<!-- snippet: ")
			name, ok2 := strings.CutSuffix(name, " -->")
			if !ok || !ok2 {
				t.Errorf("%s: a Go block without a marker (<!-- snippet: NAME --> and a context in snippets_test.go), beginning %q", p.path, firstLine(block))
				continue
			}
			ctx, ok := snippetContexts[name]
			if !ok {
				t.Errorf("%s: snippet %q has no context in snippets_test.go", p.path, name)
				continue
			}
			if other, ok := used[name]; ok {
				t.Errorf("%s: snippet %q is used by %s too", p.path, name, other)
			}
			used[name] = p.path
			n++
			src := "// Code generated by TestPageGoSnippets from " + p.path + "; DO NOT EDIT.\n\npackage snippets\n\n" + strings.Replace(ctx, "SNIPPET", block, 1) + "\n"
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("snippet_%s.go", strings.ReplaceAll(name, "-", "_"))), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name := range snippetContexts {
		if _, ok := used[name]; !ok {
			t.Errorf("context %q is used by no page's snippet", name)
		}
	}
	if n < 10 {
		t.Fatalf("compiled %d snippets, want at least 10: is the parser blind?", n)
	}
	rel, _ := filepath.Rel(repoRoot, dir)
	args := []string{"vet", "./" + filepath.ToSlash(rel)}
	for pkg := range vet {
		args = append(args, pkg)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s (the pages' snippets, each in its context from snippets_test.go, and the packages whose files pages show): %v\n%s", strings.Join(args, " "), err, out)
	}
}

// markedPackage returns the directory of the Go file named by a
// "<!-- file: PATH -->" or "<!-- go: PATH NAME -->" marker; ok is false
// for any other line.
func markedPackage(marker string) (dir string, ok bool) {
	rest, ok := strings.CutPrefix(marker, "<!-- file: ")
	if !ok {
		rest, ok = strings.CutPrefix(marker, "<!-- go: ")
	}
	if !ok {
		return "", false
	}
	path, _, _ := strings.Cut(rest, " ")
	return filepath.ToSlash(filepath.Dir(path)), true
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
