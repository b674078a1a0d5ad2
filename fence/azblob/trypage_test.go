package azblobfence_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	azblobfence "github.com/fencelock/fencelock/fence/azblob"
	"github.com/fencelock/fencelock/internal/testkit/azuritetest"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
	"github.com/fencelock/fencelock/internal/testkit/trypage"
)

// pageClient is docs/azblob.md's call of newAzuriteClient: the endpoint
// and the container.
var pageClient = regexp.MustCompile("`c, err := newAzuriteClient\\(ctx, \"([^\"]*)\", \"([^\"]*)\", nil\\)` and `store, err := azblobfence.New\\(c\\)`")

// docs/azblob.md's "Try it on your machine" works as the page says: its
// shell line starts Azurite's blob service (on a free port), and the
// page's client, newAzuriteClient with the page's endpoint and
// container, gives a Store that writes with token 34 and refuses 33.
func TestPageTryIt(t *testing.T) {
	testenv.Long(t, "starts a second Azurite (a node process) as docs/azblob.md does: about 2 s")
	if _, _, err := azuritetest.Find(); err != nil {
		testenv.Unavailable(t, err.Error(), azuritetest.HowToEnable)
	}
	endpoint, name := pageSnippet(t)
	line := trypage.Line(t, "docs/azblob.md", "install-azurite")
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	opts := &container.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: &http.Client{Transport: tr}}}
	var c *container.Client
	trypage.Start(t, trypage.Run{
		Line: line, Port: "10000",
		Ready: func(ctx context.Context, port int) error {
			var err error
			c, err = newAzuriteClient(ctx, strings.Replace(endpoint, ":10000", ":"+strconv.Itoa(port), 1), name, opts)
			return err
		},
	})
	store, err := azblobfence.New(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Put(t.Context(), "watermarks/reindex", 34, []byte("B")); err != nil {
		t.Fatalf("Put with token 34: got %v, want nil", err)
	}
	fencewant.Stale(t, store.Put(t.Context(), "watermarks/reindex", 33, []byte("A")), 33, 34)
	if rec, err := store.Get(t.Context(), "watermarks/reindex"); err != nil || rec.Token != 34 || string(rec.Value) != "B" {
		t.Fatalf("Get: got token %d %q %v, want token 34 \"B\"", rec.Token, rec.Value, err)
	}
}

// pageSnippet returns the endpoint and container docs/azblob.md gives
// newAzuriteClient.
func pageSnippet(t *testing.T) (endpoint, name string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(trypage.Root(t), "docs", "azblob.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := pageClient.FindStringSubmatch(string(b))
	if m == nil {
		t.Fatalf("docs/azblob.md: no call matching %s", pageClient)
	}
	return m[1], m[2]
}
