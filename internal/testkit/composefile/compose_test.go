package composefile_test

import (
	"maps"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

const (
	repoRoot    = "../../.."
	composePath = repoRoot + "/docker-compose.yml"
	readmePath  = repoRoot + "/README.md"
	// composeDocPath is the page with the compose commands ("the README's"
	// in the messages: the README links to it).
	composeDocPath = repoRoot + "/docs/compose.md"
)

// TestComposeFile loads docker-compose.yml as docker compose would and
// checks that it starts what the compose page (docs/compose.md) uses: the etcd
// cluster behind fencelock's --endpoints, the PostgreSQL of
// FENCELOCK_PG_DSN, the S3 server of FENCELOCK_S3_ENDPOINT, and the bucket
// FENCELOCK_S3_BUCKET, created by a one-shot service.
func TestComposeFile(t *testing.T) {
	readme := parseCommands(t, "docs/compose.md", composePage(t), true)
	p := load(t)
	for _, tc := range []struct {
		name  string
		check func(*testing.T, *types.Project, commands)
	}{
		{"README commands", checkREADME},
		{"header comment", checkHeader},
		{"etcd", checkEtcd},
		{"postgres", checkPostgres},
		{"s3", checkS3},
		{"bucket", checkBucket},
		{"one-shots", checkOneShots},
		{"images", checkImages},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, p, readme) })
	}
}

// load loads the compose file from the repository's root, validated against
// the compose specification's schema, with no variable from this process's
// environment: a variable used in the file fails the test.
func load(t *testing.T) *types.Project {
	t.Helper()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	details := types.ConfigDetails{
		WorkingDir:  root,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(root, "docker-compose.yml")}},
		Environment: types.Mapping{},
	}
	var looked []string
	p, err := loader.LoadWithContext(t.Context(), details, func(o *loader.Options) {
		o.SetProjectName("fencelock", true)
		o.Interpolate.LookupValue = func(name string) (string, bool) {
			looked = append(looked, name)
			return "", false
		}
	})
	if err != nil {
		t.Fatalf("load %s: %v", composePath, err)
	}
	if len(looked) > 0 {
		t.Errorf("%s interpolates %v: it must not depend on the caller's environment", composePath, looked)
	}
	return p
}

func checkREADME(t *testing.T, _ *types.Project, readme commands) {
	for _, prefix := range []string{"docker compose up -d --wait", "go test ", "go run ./cmd/fencelock --endpoints"} {
		if !readme.has(prefix) {
			t.Errorf("README: no command starting %q", prefix)
		}
	}
	for _, sub := range []string{" status", " run "} {
		if !slices.ContainsFunc(readme.lines, func(l string) bool {
			return strings.HasPrefix(l, "go run ./cmd/fencelock ") && strings.Contains(l, sub)
		}) {
			t.Errorf("README: no fencelock command running %q", strings.TrimSpace(sub))
		}
	}
	for _, name := range []string{"PG_DSN", "S3_ENDPOINT", "S3_REGION", "S3_ACCESS_KEY", "S3_SECRET_KEY", "S3_BUCKET"} {
		if readme.env["FENCELOCK_"+name] == "" {
			t.Errorf("README: FENCELOCK_%s not exported", name)
		}
	}
}

// checkHeader checks the commands in the compose file's own comment against
// the README's.
func checkHeader(t *testing.T, _ *types.Project, readme commands) {
	header := parseCommands(t, composePath, headerComment(t), false)
	if !header.has("docker compose up -d --wait") {
		t.Errorf("%s comment: no docker compose up -d --wait", composePath)
	}
	if !maps.Equal(header.env, readme.env) {
		t.Errorf("%s comment exports %v; want the README's %v", composePath, header.env, readme.env)
	}
	if header.endpoints != nil && !slices.Equal(header.endpoints, readme.endpoints) {
		t.Errorf("%s comment: --endpoints %v; want the README's %v", composePath, header.endpoints, readme.endpoints)
	}
}

func checkPostgres(t *testing.T, p *types.Project, readme commands) {
	svc := onlyImage(t, p, "postgres:")
	checkHealthcheck(t, svc)
	dsn, err := url.Parse(readme.env["FENCELOCK_PG_DSN"])
	if err != nil {
		t.Fatalf("README: FENCELOCK_PG_DSN: %v", err)
	}
	password, _ := dsn.User.Password()
	for _, c := range []struct{ what, got, want string }{
		{"DSN host", dsn.Hostname(), "localhost"},
		{"DSN port", dsn.Port(), published(t, svc, 5432)},
		{"DSN user", dsn.User.Username(), env(svc, "POSTGRES_USER")},
		{"DSN password", password, env(svc, "POSTGRES_PASSWORD")},
		{"DSN database", strings.TrimPrefix(dsn.Path, "/"), env(svc, "POSTGRES_DB")},
	} {
		if c.got != c.want || c.want == "" {
			t.Errorf("postgres: README's %s: got %q, want %q (compose service %s)", c.what, c.got, c.want, svc.Name)
		}
	}
}

// checkImages checks that every image is pinned to a version.
func checkImages(t *testing.T, p *types.Project, _ commands) {
	pinned := regexp.MustCompile(`:v?[0-9]+\.[0-9]+(\.[0-9]+)?$`)
	for _, svc := range sorted(p) {
		if !pinned.MatchString(svc.Image) {
			t.Errorf("service %s: image %q: want a tag pinned to a version (X.Y or X.Y.Z)", svc.Name, svc.Image)
		}
	}
}

// checkOneShots checks that docker compose up --wait can succeed: it counts
// a one-shot service's exit, even with status 0, as a failure unless a
// service that keeps running depends on its completion
// (https://github.com/docker/compose/issues/10596).
func checkOneShots(t *testing.T, p *types.Project, _ commands) {
	for _, oneShot := range sorted(p) {
		if oneShot.Restart != types.RestartPolicyNo {
			continue
		}
		adopted := slices.ContainsFunc(sorted(p), func(s types.ServiceConfig) bool {
			return s.Restart != types.RestartPolicyNo &&
				s.DependsOn[oneShot.Name].Condition == types.ServiceConditionCompletedSuccessfully
		})
		if !adopted {
			t.Errorf("one-shot service %s: no running service depends on it with condition %s, so docker compose up --wait fails when it exits",
				oneShot.Name, types.ServiceConditionCompletedSuccessfully)
		}
	}
}
