package harness

import (
	"os"
	"slices"
	"testing"

	"github.com/fencelock/fencelock/internal/app/harness/check"
	"github.com/fencelock/fencelock/internal/testkit/azuritetest"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// The azblob kind, on a real Azurite through the run's proxy (azLog): a
// paused holder's Put after a newer token's is refused by its If-Match
// (fence/azblob), so the proxy's log of what Azurite stored does not have
// it; the control's plain Put Blob lands, after the newer write, and the
// checker finds it.
func TestAzureHistory(t *testing.T) {
	srv, err := azuritetest.Start(t.Context())
	if err != nil {
		if os.Getenv(azuritetest.EnvEndpoint) == "" {
			testenv.NoServer(t, err, azuritetest.ErrNoAzurite, azuritetest.HowToEnable)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	log, err := startAzLog(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(log.close)
	open := func() azResource {
		r, err := openAzResource(azConfig{URL: log.URL(), Account: azuritetest.Account, Key: azuritetest.AccountKey, Container: azuritetest.Container})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	old, newer := open(), open()
	checkPaused(t, check.ResAzure, old, newer, writeAfterNewer,
		func(st *check.Storage) error { log.read(st, []string{"fenced", "control"}); return nil })
}

// chained puts a write conditional on an ETag after the write that made
// it, whatever order the proxy received their answers in.
func TestAzureChained(t *testing.T) {
	puts := []azPut{
		{blob: "k", token: 1, etag: "a"},
		{blob: "k", token: 3, etag: "c", ifMatch: "b"}, // answered before the write it followed
		{blob: "other", token: 9, etag: "x"},
		{blob: "k", token: 2, etag: "b", ifMatch: "a"},
		{blob: "k", token: 1, etag: "d"}, // a plain write: the log's order
	}
	var got []int64
	for _, p := range chained(puts, "k") {
		got = append(got, p.token)
	}
	if want := []int64{1, 2, 3, 1}; !slices.Equal(got, want) {
		t.Errorf("chained: got tokens %v, want %v", got, want)
	}
}
