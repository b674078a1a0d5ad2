package azblobfence_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"

	"github.com/fencelock/fencelock/fence"
	azblobfence "github.com/fencelock/fencelock/fence/azblob"
	"github.com/fencelock/fencelock/internal/testkit/benchkit"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// BenchmarkPut compares, on one server and in one run, a fenced Put (a
// holder's next write: one Put Blob with If-Match on the ETag its last
// write saw, and the fencelock metadata) with the store's plain write,
// one unconditional Put Blob of the same bytes. Goal: fenced/plain ≤
// 1.15. The server is Azurite in memory on the same machine: the figures
// are the SDK's and Azurite's, not Azure's.
func BenchmarkPut(b *testing.B) {
	value := bytes.Repeat([]byte("x"), 1024)
	c := client(b)
	p := fencewant.Prefix(b)
	s := mustNew(b, c, azblobfence.WithPrefix(p))
	fencewant.Put(b, s, "k", 7, string(value)) // the check of the server, and the first write, outside the loop
	plainBlob := c.NewBlockBlobClient(p + "plain")
	plain := func() error {
		_, err := plainBlob.Upload(b.Context(), streaming.NopCloser(bytes.NewReader(value)), nil)
		return err
	}
	fenced := func() error { return s.Put(b.Context(), "k", 7, value) }
	d := benchkit.Interleave(b, plain, fenced)
	n := float64(b.N)
	b.ReportMetric(float64(d[0].Nanoseconds())/n, "plain-ns/op")
	b.ReportMetric(float64(d[1].Nanoseconds())/n, "fenced-ns/op")
	b.ReportMetric(float64(d[1])/float64(d[0]), "fenced/plain")
}

// BenchmarkUpdate compares a fenced read-modify-write (Update by a holder
// whose token the blob holds already: a GET, then a Put Blob with
// If-Match) with the plain one: a GET of the blob, then a Put Blob with
// If-Match on the ETag read. Goal: update/plain ≤ 1.25.
func BenchmarkUpdate(b *testing.B) {
	value := bytes.Repeat([]byte("x"), 1024)
	c := client(b)
	p := fencewant.Prefix(b)
	s := mustNew(b, c, azblobfence.WithPrefix(p))
	plainBlob := c.NewBlockBlobClient(p + "plain")
	if _, err := plainBlob.Upload(b.Context(), streaming.NopCloser(bytes.NewReader(value)), nil); err != nil {
		b.Fatal(err)
	}
	fencewant.Put(b, s, "k", 7, string(value))
	plain := func() error {
		r, err := plainBlob.DownloadStream(b.Context(), nil)
		if err != nil {
			return err
		}
		v, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return err
		}
		v[0]++
		_, err = plainBlob.Upload(b.Context(), streaming.NopCloser(bytes.NewReader(v)), &blockblob.UploadOptions{
			AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: r.ETag}},
		})
		return err
	}
	update := func() error {
		return s.Update(b.Context(), "k", 7, func(old fence.Record) ([]byte, error) { v := bytes.Clone(old.Value); v[0]++; return v, nil })
	}
	d := benchkit.Interleave(b, plain, update)
	n := float64(b.N)
	b.ReportMetric(float64(d[0].Nanoseconds())/n, "plain-ns/op")
	b.ReportMetric(float64(d[1].Nanoseconds())/n, "update-ns/op")
	b.ReportMetric(float64(d[1])/float64(d[0]), "update/plain")
}
