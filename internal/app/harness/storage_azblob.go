package harness

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	azblobfence "github.com/fencelock/fencelock/fence/azblob"
	"github.com/fencelock/fencelock/internal/app/harness/check"
	"github.com/fencelock/fencelock/internal/testkit/azuritetest"
)

// azLog is the run's record of its Azure blobs' history: Azurite keeps no
// blob versions, so the runner (the checker's side) puts a proxy between
// the workers and Azurite and logs every Put Blob that Azurite answered
// 201 Created, as it answered it: the blob, its token (the write's
// metadata), its value (the request's body), the ETag it got, and the
// If-Match it was sent with. A refused write (412, 409) is not in the
// log. The proxy sends each request on whatever the worker does meanwhile
// (a worker killed mid-write does not cancel it), and reads each answer
// whole, so a write that landed is logged even when its worker never
// hears of it.
type azLog struct {
	target *url.URL // Azurite's endpoint
	ln     net.Listener
	srv    *http.Server
	client *http.Client

	mu   sync.Mutex // guards puts
	puts []azPut    // in the order the proxy received Azurite's answers
}

// azPut is one Put Blob that Azurite stored.
type azPut struct {
	blob          string // the blob's name in its container
	token         int64
	value         string
	floor         bool   // a floor alone (fence/azblob's "floor" kind)
	etag, ifMatch string // the ETag it got; the one it was conditional on ("" for none)
}

// startAzure starts the run's Azurite and the proxy in front of it, if
// the run writes Azure blobs.
func (r *runner) startAzure(ctx context.Context) error {
	if !r.uses(check.ResAzure) {
		return nil
	}
	var err error
	if r.azure, err = azuritetest.Start(ctx); err != nil {
		return fmt.Errorf("harness: starting Azurite: %w", err)
	}
	r.azLog, err = startAzLog(r.azure.URL())
	return err
}

// azConfig is where the run's workers reach its Azurite: the zero
// azConfig when it has none.
func (r *runner) azConfig() azConfig {
	if r.azLog == nil {
		return azConfig{}
	}
	return azConfig{URL: r.azLog.URL(), Account: azuritetest.Account, Key: cmp.Or(os.Getenv(azuritetest.EnvKey), azuritetest.AccountKey),
		Container: azuritetest.Container}
}

// startAzLog starts the proxy in front of endpoint (Azurite's blob
// endpoint, its account in the path).
func startAzLog(endpoint string) (*azLog, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &azLog{target: u, ln: ln, client: &http.Client{Timeout: 30 * time.Second}}
	l.srv = &http.Server{Handler: l, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = l.srv.Serve(ln) }()
	return l, nil
}

// URL returns the proxy's endpoint, the account in its path as in
// Azurite's.
func (l *azLog) URL() string { return "http://" + l.ln.Addr().String() + l.target.Path }

func (l *azLog) close() {
	_ = l.srv.Close()
	l.client.CloseIdleConnections()
}

// ServeHTTP sends r on to Azurite, whatever its sender does meanwhile,
// logs it if it stored a blob, and relays the answer.
func (l *azLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the worker went away before it sent the write: nothing went out
	}
	out := r.Clone(context.WithoutCancel(r.Context()))
	out.RequestURI, out.Host = "", ""
	out.URL.Scheme, out.URL.Host = l.target.Scheme, l.target.Host
	out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	resp, err := l.client.Do(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	rbody, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	l.note(r, body, resp)
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(rbody)
}

// note logs r if it was a Put Blob that Azurite stored.
func (l *azLog) note(r *http.Request, body []byte, resp *http.Response) {
	if r.Method != http.MethodPut || resp.StatusCode != http.StatusCreated || r.URL.Query().Has("comp") ||
		!strings.EqualFold(r.Header.Get("x-ms-blob-type"), "BlockBlob") {
		return
	}
	tok, err := strconv.ParseInt(r.Header.Get("x-ms-meta-"+azblobfence.MetadataToken), 10, 64)
	if err != nil {
		return // not a write of the harness's (the Store's probe has a token too; the keys filter it)
	}
	// The path is /account/container/blob.
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 3)
	if len(parts) < 3 {
		return
	}
	p := azPut{blob: parts[2], token: tok, value: string(body), etag: resp.Header.Get("ETag"), ifMatch: r.Header.Get("If-Match"),
		floor: r.Header.Get("x-ms-meta-"+azblobfence.MetadataKind) == "floor"}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.puts = append(l.puts, p)
}

// read adds the history of the run's keys to h: each blob's writes in the
// order Azurite applied them. A write conditional on an ETag (fence/
// azblob's) comes after the write that made that ETag, which is how
// Azurite ordered them; the proxy's order, that of Azurite's answers, may
// differ between two answers under way at once. The log's order stands
// where the chain does not decide (the control's plain writes, or an ETag
// Azurite gave twice).
func (l *azLog) read(h *check.Storage, keys []string) {
	l.mu.Lock()
	puts := append([]azPut(nil), l.puts...)
	l.mu.Unlock()
	for _, k := range keys {
		res := check.ResourceName(check.ResAzure, k)
		for _, p := range chained(puts, k) {
			if p.floor {
				continue
			}
			h.Writes[res] = append(h.Writes[res], check.Record{Token: p.token, Value: p.value})
			h.Final[res] = p.value
		}
	}
}

// chained returns blob's puts in the log's order, moving each that is
// conditional on an ETag right after the put that made it when one put,
// and one only, made it.
func chained(puts []azPut, blob string) []azPut {
	var mine []azPut
	made := map[string]int{}
	for _, p := range puts {
		if p.blob == blob {
			mine = append(mine, p)
			made[p.etag]++
		}
	}
	var out []azPut
	placed := make([]bool, len(mine))
	var place func(i int)
	place = func(i int) {
		placed[i] = true
		out = append(out, mine[i])
		if made[mine[i].etag] != 1 {
			return
		}
		for j, q := range mine {
			if !placed[j] && q.ifMatch != "" && q.ifMatch == mine[i].etag {
				place(j)
				return
			}
		}
	}
	for i, p := range mine {
		if !placed[i] && (p.ifMatch == "" || made[p.ifMatch] != 1) {
			place(i)
		}
	}
	for i := range mine { // conditional on an ETag no put made: their own order
		if !placed[i] {
			place(i)
		}
	}
	return out
}
