// Package azuritetest gives tests an Azure Blob Storage-compatible server:
// Azurite's blob service (https://github.com/Azure/Azurite, node;
// .ci/install-azurite.sh installs it), in memory, on a loopback port, with
// the container [Container] of the well-known development account
// devstoreaccount1 ([Account], [AccountKey]). The real azblob client talks
// to it over HTTP, so a transport that loses replies sits where the
// network would.
//
// If the environment variable FENCELOCK_AZURITE_ENDPOINT is set (a blob
// endpoint with its account, such as http://127.0.0.1:10000/devstoreaccount1),
// the server it names is used instead, with the development account's key
// unless FENCELOCK_AZURITE_KEY says otherwise.
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(azuritetest.Main(m)) }
//
//	func TestX(t *testing.T) {
//		c := azuritetest.New(t).Container(t, nil)
//		...
//	}
package azuritetest

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/fencelock/fencelock/internal/testkit/childproc"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// Environment variables that point the tests at a server of one's own.
const (
	// EnvEndpoint names an existing blob endpoint, the account in its
	// path (Azurite's form) or its host (Azure's).
	EnvEndpoint = "FENCELOCK_AZURITE_ENDPOINT"
	// EnvKey is the account key for EnvEndpoint's account; default
	// [AccountKey].
	EnvKey = "FENCELOCK_AZURITE_KEY"
)

// The development account every Azurite serves, and its published key
// (https://learn.microsoft.com/azure/storage/common/storage-use-azurite).
const (
	Account    = "devstoreaccount1"
	AccountKey = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// Container is the container the server is started with.
const Container = "fencelock-test"

var shared = &testenv.Shared[*Server]{
	Name: "azuritetest", Start: Start, Timeout: 60 * time.Second, Unavailable: ErrNoAzurite, HowToEnable: HowToEnable,
}

// Main returns m wrapped for TestMain: one server for the package's tests.
func Main(m testenv.Runner) testenv.Main { return shared.Main(m) }

// Shared returns the server started by [Main], or nil outside of it.
func Shared() *Server { return shared.Get() }

// New returns the package's server started by [Main], or starts one for t.
// Without Azurite it skips t, or fails it under CI=true.
func New(t testing.TB) *Server {
	t.Helper()
	return shared.New(t)
}

// Server is a blob endpoint with the container [Container]. Its fields
// are set once before use, but for trs.
type Server struct {
	url  string          // the blob endpoint, the account included
	key  string          // the account's key
	proc *childproc.Proc // Azurite's, when this package started it
	ws   string          // its workspace, removed by Close

	mu  sync.Mutex
	trs []*http.Transport // the clients', whose connections Close closes
}

// Start starts azurite-blob in memory on a free loopback port, on another
// if the port was taken meanwhile, and creates [Container]; or returns
// the server FENCELOCK_AZURITE_ENDPOINT names, with the container created
// unless it exists. Without Azurite or node the error matches
// [ErrNoAzurite].
func Start(ctx context.Context) (*Server, error) {
	if u := os.Getenv(EnvEndpoint); u != "" {
		s := &Server{url: u, key: cmp.Or(os.Getenv(EnvKey), AccountKey)}
		return s, s.createContainer(ctx)
	}
	return startAzurite(ctx)
}

// URL returns the blob endpoint, with the account:
// http://127.0.0.1:<port>/devstoreaccount1 for Azurite.
func (s *Server) URL() string { return s.url }

// Close stops a server this package started, and closes the clients'
// idle connections.
func (s *Server) Close() error {
	s.closeIdle()
	if s.proc != nil {
		s.proc.Kill()
	}
	if s.ws != "" {
		return os.RemoveAll(s.ws)
	}
	return nil
}

// Container returns a client of [Container] whose requests go through
// wrap (nil: directly), with the SDK's default retries; its idle
// connections are closed when t ends.
func (s *Server) Container(t testing.TB, wrap func(http.RoundTripper) http.RoundTripper) *container.Client {
	t.Helper()
	c, err := s.NewContainerClient(Container, wrap)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.closeIdle)
	return c
}

// NewContainerClient returns a client of the container name (which need
// not exist), as [Server.Container] does; the server's Close closes its
// idle connections.
func (s *Server) NewContainerClient(name string, wrap func(http.RoundTripper) http.RoundTripper) (*container.Client, error) {
	cred, err := container.NewSharedKeyCredential(Account, s.key)
	if err != nil {
		return nil, fmt.Errorf("azuritetest: %w", err)
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	s.mu.Lock()
	s.trs = append(s.trs, base)
	s.mu.Unlock()
	var tr http.RoundTripper = base
	if wrap != nil {
		tr = wrap(tr)
	}
	return container.NewClientWithSharedKeyCredential(s.url+"/"+name, cred, &container.ClientOptions{
		ClientOptions: azcore.ClientOptions{
			Transport: &http.Client{Transport: tr},
			// The SDK's delay before a retry is 800 ms; a test's read
			// that meets a fault of its own need not wait that long.
			Retry: policy.RetryOptions{RetryDelay: 10 * time.Millisecond, MaxRetryDelay: 100 * time.Millisecond},
		},
	})
}

// createContainer creates [Container] unless it exists, trying once
// (Start's readiness poll tries again).
func (s *Server) createContainer(ctx context.Context) error {
	c, err := s.NewContainerClient(Container, nil)
	if err != nil {
		return err
	}
	defer s.closeIdle()
	ctx = policy.WithRetryOptions(ctx, policy.RetryOptions{MaxRetries: -1})
	_, err = c.Create(ctx, nil)
	if err != nil && !bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
		return fmt.Errorf("azuritetest: creating container %s at %s: %w", Container, s.url, err)
	}
	return nil
}

func (s *Server) closeIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, tr := range s.trs {
		tr.CloseIdleConnections()
	}
}
