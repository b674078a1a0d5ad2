package composefile_test

import (
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
)

// checkEtcd checks for three etcd members that form one cluster, each
// healthy only when it can serve, and each reachable at one of the README's
// --endpoints.
func checkEtcd(t *testing.T, p *types.Project, readme commands) {
	members := byImage(p, "gcr.io/etcd-development/etcd:")
	if len(members) != 3 {
		t.Fatalf("got %d etcd services, want 3", len(members))
	}
	peers := map[string]string{} // ETCD_NAME: its peer URL
	var ports []string
	for _, m := range members {
		checkHealthcheck(t, m)
		ports = append(ports, published(t, m, 2379))
		peer := env(m, "ETCD_INITIAL_ADVERTISE_PEER_URLS")
		if u, err := url.Parse(peer); err != nil || u.Hostname() != m.Name {
			t.Errorf("%s: peer URL %q: want one on host %s, the service's name", m.Name, peer, m.Name)
		}
		peers[env(m, "ETCD_NAME")] = peer
	}
	for _, m := range members {
		if got := parseCluster(env(m, "ETCD_INITIAL_CLUSTER")); !maps.Equal(got, peers) {
			t.Errorf("%s: ETCD_INITIAL_CLUSTER names %v; want the three members %v", m.Name, got, peers)
		}
	}
	want := readme.endpointPorts(t)
	slices.Sort(ports)
	slices.Sort(want)
	if len(slices.Compact(slices.Clone(ports))) != 3 || !slices.Equal(ports, want) {
		t.Errorf("etcd client ports on the host: got %v, want %v (the README's --endpoints), all distinct", ports, want)
	}
}

func parseCluster(s string) map[string]string {
	m := map[string]string{}
	for member := range strings.SplitSeq(s, ",") {
		name, peer, _ := strings.Cut(member, "=")
		m[name] = peer
	}
	return m
}

// checkS3 checks that versitygw serves FENCELOCK_S3_ENDPOINT with the
// README's credentials, keeps object versions (s3test.VersionedBucket reads
// them) and has a health check.
func checkS3(t *testing.T, p *types.Project, readme commands) {
	svc := onlyImage(t, p, "versity/versitygw:")
	checkHealthcheck(t, svc)
	endpoint, err := url.Parse(readme.env["FENCELOCK_S3_ENDPOINT"])
	if err != nil || endpoint.Hostname() != "localhost" {
		t.Errorf("README: FENCELOCK_S3_ENDPOINT %q: want http://localhost:PORT (err %v)", endpoint, err)
	}
	if got, want := endpoint.Port(), published(t, svc, s3Port(t, svc)); got != want {
		t.Errorf("README: FENCELOCK_S3_ENDPOINT port: got %s, want %s, published by %s", got, want, svc.Name)
	}
	for name, want := range map[string]string{
		"ROOT_ACCESS_KEY": readme.env["FENCELOCK_S3_ACCESS_KEY"],
		"ROOT_SECRET_KEY": readme.env["FENCELOCK_S3_SECRET_KEY"],
	} {
		if got := env(svc, name); got != want {
			t.Errorf("%s: %s: got %q, want %q (the README's)", svc.Name, name, got, want)
		}
	}
	if !slices.Contains(svc.Command, "--versioning-dir") {
		t.Errorf("%s: command %q has no --versioning-dir: the suite needs a versioned bucket", svc.Name, svc.Command)
	}
}

// s3Port returns the port versitygw listens on in its container.
func s3Port(t *testing.T, svc types.ServiceConfig) uint32 {
	t.Helper()
	i := slices.Index(svc.Command, "--port")
	if i < 0 || i+1 == len(svc.Command) {
		t.Fatalf("%s: command %q: no --port", svc.Name, svc.Command)
	}
	_, port, _ := strings.Cut(svc.Command[i+1], ":")
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		t.Fatalf("%s: --port %s: %v", svc.Name, svc.Command[i+1], err)
	}
	return uint32(n)
}

// checkBucket checks for the one-shot service that creates
// FENCELOCK_S3_BUCKET, with versioning, once the S3 server is healthy.
func checkBucket(t *testing.T, p *types.Project, readme commands) {
	s3 := onlyImage(t, p, "versity/versitygw:")
	var oneShots []types.ServiceConfig
	for _, svc := range sorted(p) {
		if svc.Restart == types.RestartPolicyNo && svc.DependsOn[s3.Name].Condition == types.ServiceConditionHealthy {
			oneShots = append(oneShots, svc)
		}
	}
	if len(oneShots) != 1 {
		t.Fatalf("got %d one-shot services (restart: \"no\") started once %s is healthy, want 1", len(oneShots), s3.Name)
	}
	svc, bucket := oneShots[0], readme.env["FENCELOCK_S3_BUCKET"]
	script := strings.Join(append(slices.Clone(svc.Entrypoint), svc.Command...), " ")
	for _, want := range []string{
		`create-bucket --bucket ` + regexp.QuoteMeta(bucket) + `\s`,
		`put-bucket-versioning --bucket ` + regexp.QuoteMeta(bucket) + ` .*Status=Enabled\s`,
	} {
		if !regexp.MustCompile(want).MatchString(script + "\n") {
			t.Errorf("%s: script %q does not match %q", svc.Name, script, want)
		}
	}
	for name, want := range map[string]string{
		"AWS_ENDPOINT_URL":      "http://" + s3.Name + ":" + strconv.Itoa(int(s3Port(t, s3))),
		"AWS_ACCESS_KEY_ID":     readme.env["FENCELOCK_S3_ACCESS_KEY"],
		"AWS_SECRET_ACCESS_KEY": readme.env["FENCELOCK_S3_SECRET_KEY"],
		"AWS_DEFAULT_REGION":    readme.env["FENCELOCK_S3_REGION"],
	} {
		if got := env(svc, name); got != want {
			t.Errorf("%s: %s: got %q, want %q", svc.Name, name, got, want)
		}
	}
}

func checkHealthcheck(t *testing.T, svc types.ServiceConfig) {
	t.Helper()
	if hc := svc.HealthCheck; hc == nil || hc.Disable || len(hc.Test) < 2 || hc.Test[0] == "NONE" {
		t.Errorf("%s: got healthcheck %+v, want a test command", svc.Name, hc)
	}
}

// published returns the host port that svc publishes its container port
// target on.
func published(t *testing.T, svc types.ServiceConfig, target uint32) string {
	t.Helper()
	for _, p := range svc.Ports {
		if p.Target == target {
			return p.Published
		}
	}
	t.Errorf("%s: container port %d not published", svc.Name, target)
	return ""
}

func env(svc types.ServiceConfig, name string) string {
	if v := svc.Environment[name]; v != nil {
		return *v
	}
	return ""
}

// sorted returns p's services in name order.
func sorted(p *types.Project) []types.ServiceConfig {
	return slices.SortedFunc(maps.Values(p.Services), func(a, b types.ServiceConfig) int {
		return strings.Compare(a.Name, b.Name)
	})
}

func byImage(p *types.Project, prefix string) []types.ServiceConfig {
	return slices.DeleteFunc(sorted(p), func(s types.ServiceConfig) bool { return !strings.HasPrefix(s.Image, prefix) })
}

func onlyImage(t *testing.T, p *types.Project, prefix string) types.ServiceConfig {
	t.Helper()
	svcs := byImage(p, prefix)
	if len(svcs) != 1 {
		t.Fatalf("got %d services with image %s*, want 1", len(svcs), prefix)
	}
	return svcs[0]
}
