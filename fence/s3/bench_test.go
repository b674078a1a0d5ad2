package s3fence_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fencelock/fencelock/fence"
	s3fence "github.com/fencelock/fencelock/fence/s3"
	"github.com/fencelock/fencelock/internal/testkit/oteltest"
	"github.com/fencelock/fencelock/internal/testkit/s3test"
)

// BenchmarkPut compares, on one server and in one run, a plain PutObject, a
// fenced Put whose version is cached (one conditional PUT), and a fenced Put
// without the cache (a ranged GET, then the conditional PUT). The goal is
// fenced-cached ≤ 1.15 × plain.
func BenchmarkPut(b *testing.B) {
	value := bytes.Repeat([]byte("x"), 1024)
	srv := s3test.New(b)
	c := srv.Client(b)
	b.Run("plain", func(b *testing.B) {
		k := key(b)
		for b.Loop() {
			_, err := c.PutObject(b.Context(), &s3.PutObjectInput{
				Bucket: aws.String(srv.Bucket), Key: aws.String(k), Body: bytes.NewReader(value),
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, bm := range []struct {
		name string
		opts []s3fence.Option
	}{
		{"fenced-cached", nil},
		{"fenced-cold", []s3fence.Option{s3fence.WithCacheSize(0)}},
	} {
		b.Run(bm.name, func(b *testing.B) {
			s := mustNew(b, c, srv.Bucket, bm.opts...)
			mustCheck(b, s)
			k := key(b)
			for b.Loop() {
				if err := s.Put(b.Context(), k, 7, value); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPutInterleaved runs the three writes of BenchmarkPut in turn
// within each iteration, so that load from other processes on the machine
// falls on all three alike, and reports each one's time and the ratios.
func BenchmarkPutInterleaved(b *testing.B) {
	value := bytes.Repeat([]byte("x"), 1024)
	srv := s3test.New(b)
	c := srv.Client(b)
	cached := mustNew(b, c, srv.Bucket)
	cold := mustNew(b, c, srv.Bucket, s3fence.WithCacheSize(0))
	mustCheck(b, cached)
	mustCheck(b, cold)
	kPlain, kCached, kCold := key(b)+"plain", key(b)+"cached", key(b)+"cold"
	var tPlain, tCached, tCold time.Duration
	for b.Loop() {
		t0 := time.Now()
		_, err := c.PutObject(b.Context(), &s3.PutObjectInput{
			Bucket: aws.String(srv.Bucket), Key: aws.String(kPlain), Body: bytes.NewReader(value),
		})
		t1 := time.Now()
		err = errors.Join(err, cached.Put(b.Context(), kCached, 7, value))
		t2 := time.Now()
		err = errors.Join(err, cold.Put(b.Context(), kCold, 7, value))
		tPlain, tCached, tCold = tPlain+t1.Sub(t0), tCached+t2.Sub(t1), tCold+time.Since(t2)
		if err != nil {
			b.Fatal(err)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(tPlain.Nanoseconds())/n, "plain-ns/op")
	b.ReportMetric(float64(tCached.Nanoseconds())/n, "cached-ns/op")
	b.ReportMetric(float64(tCold.Nanoseconds())/n, "cold-ns/op")
	b.ReportMetric(float64(tCached)/float64(tPlain), "cached/plain")
	b.ReportMetric(float64(tCold)/float64(tPlain), "cold/plain")
}

// mustCheck runs the Store's conditional-write check, so that a benchmark
// times the writes that follow it and not the one-off probe.
func mustCheck(b *testing.B, s *s3fence.Store) {
	b.Helper()
	if err := s.CheckConditionalWrites(b.Context()); err != nil {
		b.Fatalf("CheckConditionalWrites: got %v, want nil", err)
	}
}

// BenchmarkPutTelemetry: a fenced Put whose version is cached, by a Store on
// the global providers with no SDK installed (the default) and by one with
// the OpenTelemetry SDK (metrics to a reader, every span recorded),
// alternating in one loop. Goal: sdk/nosdk <= 1.03.
func BenchmarkPutTelemetry(b *testing.B) {
	value := bytes.Repeat([]byte("x"), 1024)
	srv := s3test.New(b)
	c := srv.Client(b)
	otel := oteltest.New(b)
	plain := mustNew(b, c, srv.Bucket)
	sdk := mustNew(b, c, srv.Bucket, s3fence.WithMeterProvider(otel.Meters), s3fence.WithTracerProvider(otel.Tracers))
	mustCheck(b, plain)
	mustCheck(b, sdk)
	kPlain, kSDK := key(b)+"nosdk", key(b)+"sdk"
	var tPlain, tSDK time.Duration
	for i := 0; b.Loop(); i++ {
		first, second, k1, k2, t1, t2 := plain, sdk, kPlain, kSDK, &tPlain, &tSDK
		if i%2 == 1 {
			first, second, k1, k2, t1, t2 = sdk, plain, kSDK, kPlain, &tSDK, &tPlain
		}
		start := time.Now()
		err := first.Put(b.Context(), k1, 7, value)
		mid := time.Now()
		err = errors.Join(err, second.Put(b.Context(), k2, 7, value))
		*t1, *t2 = *t1+mid.Sub(start), *t2+time.Since(mid)
		if err != nil {
			b.Fatal(err)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(tPlain.Microseconds())/n, "nosdk-µs/op")
	b.ReportMetric(float64(tSDK.Microseconds())/n, "sdk-µs/op")
	b.ReportMetric(float64(tSDK)/float64(tPlain), "sdk/nosdk")
}

// BenchmarkPutLarge: the memory and time of a plain PutObject, a fenced
// PutReader (one conditional PutObject, the envelope streamed before the
// value) and, at 64 MiB, a fenced multipart PutReader (16 MiB parts), with
// a 1 MiB and a 64 MiB value. The value is allocated once, outside the
// loop: B/op is what a write costs besides it, and must not grow with the
// value on the fenced paths.
func BenchmarkPutLarge(b *testing.B) {
	srv := s3test.New(b)
	c := srv.Client(b)
	for _, size := range []int{1 << 20, 64 << 20} {
		value := bytes.Repeat([]byte("x"), size)
		name := fmt.Sprintf("%dMiB", size>>20)
		b.Run(name+"/plain", func(b *testing.B) {
			b.ReportAllocs()
			k := key(b)
			for b.Loop() {
				if err := plainPut(b, c, srv.Bucket, k, value); err != nil {
					b.Fatal(err)
				}
			}
		})
		stores := map[string]*s3fence.Store{"fenced-stream": mustNew(b, c, srv.Bucket)}
		if size > 16<<20 {
			stores["fenced-multipart"] = mustNew(b, c, srv.Bucket, s3fence.WithMultipartThreshold(16<<20), s3fence.WithPartSize(16<<20))
		}
		for _, bm := range slices.Sorted(maps.Keys(stores)) {
			s := stores[bm]
			mustCheck(b, s)
			b.Run(name+"/"+bm, func(b *testing.B) {
				b.ReportAllocs()
				k := key(b)
				for b.Loop() {
					if err := s.PutReader(b.Context(), k, 7, bytes.NewReader(value)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkPutLargeInterleaved runs the three 64 MiB writes of
// BenchmarkPutLarge, and an unfenced multipart upload of the same parts, in
// turn within each iteration, so that load from other processes falls on
// all of them alike, and reports each one's time and the ratios to their
// unfenced baselines.
func BenchmarkPutLargeInterleaved(b *testing.B) {
	srv := s3test.New(b)
	c := srv.Client(b)
	value := bytes.Repeat([]byte("x"), 64<<20)
	stream := mustNew(b, c, srv.Bucket)
	multi := mustNew(b, c, srv.Bucket, s3fence.WithMultipartThreshold(16<<20), s3fence.WithPartSize(16<<20))
	mustCheck(b, stream)
	mustCheck(b, multi)
	if err := multi.CheckMultipartConditionalWrites(b.Context()); err != nil {
		b.Fatal(err)
	}
	kPlain, kStream, kMulti, kPlainMulti := key(b)+"plain", key(b)+"stream", key(b)+"multi", key(b)+"plainmulti"
	var tPlain, tStream, tMulti, tPlainMulti time.Duration
	for b.Loop() {
		t0 := time.Now()
		err := plainPut(b, c, srv.Bucket, kPlain, value)
		t1 := time.Now()
		err = errors.Join(err, stream.PutReader(b.Context(), kStream, 7, bytes.NewReader(value)))
		t2 := time.Now()
		err = errors.Join(err, multi.PutReader(b.Context(), kMulti, 7, bytes.NewReader(value)))
		t3 := time.Now()
		err = errors.Join(err, plainMultipart(b, c, srv.Bucket, kPlainMulti, value, 16<<20))
		tPlain, tStream, tMulti, tPlainMulti = tPlain+t1.Sub(t0), tStream+t2.Sub(t1), tMulti+t3.Sub(t2), tPlainMulti+time.Since(t3)
		if err != nil {
			b.Fatal(err)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(tPlain.Milliseconds())/n, "plain-ms/op")
	b.ReportMetric(float64(tStream.Milliseconds())/n, "stream-ms/op")
	b.ReportMetric(float64(tMulti.Milliseconds())/n, "multipart-ms/op")
	b.ReportMetric(float64(tPlainMulti.Milliseconds())/n, "plain-multipart-ms/op")
	b.ReportMetric(float64(tStream)/float64(tPlain), "stream/plain")
	b.ReportMetric(float64(tMulti)/float64(tPlain), "multipart/plain")
	b.ReportMetric(float64(tMulti)/float64(tPlainMulti), "multipart/plain-multipart")
}

// plainMultipart is an unconditional multipart upload of value in parts of
// partSize, without the envelope: the baseline of a fenced multipart write.
func plainMultipart(b *testing.B, c *s3.Client, bucket, k string, value []byte, partSize int) error {
	ctx := b.Context()
	up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &bucket, Key: &k})
	if err != nil {
		return err
	}
	var parts []types.CompletedPart
	for n, off := int32(1), 0; off < len(value); n, off = n+1, off+partSize {
		p := value[off:min(off+partSize, len(value))]
		out, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: &bucket, Key: &k, UploadId: up.UploadId, PartNumber: aws.Int32(n),
			Body: bytes.NewReader(p), ContentLength: aws.Int64(int64(len(p)))})
		if err != nil {
			return err
		}
		parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(n), ETag: out.ETag, ChecksumCRC32: out.ChecksumCRC32})
	}
	_, err = c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &bucket, Key: &k, UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
	return err
}

// plainPut is an unconditional PutObject of value.
func plainPut(b *testing.B, c *s3.Client, bucket, k string, value []byte) error {
	_, err := c.PutObject(b.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k), Body: bytes.NewReader(value)})
	return err
}

// BenchmarkUpdateInterleaved compares, in turn within each iteration so
// that load from other processes falls on all alike, the read-modify-write
// a user writes without fencing (a GetObject, then a PutObject with
// If-Match on the ETag read), Update on a key its token has claimed (a
// GET, then a conditional PUT), and Update whose token rises every time
// (a GET, the claim's PUT, the write's PUT), of a 1 KiB value. Goal:
// update/plain ≤ 1.25; the claim is paid once per holder and key.
func BenchmarkUpdateInterleaved(b *testing.B) {
	value := bytes.Repeat([]byte("x"), 1024)
	srv := s3test.New(b)
	c := srv.Client(b)
	s := mustNew(b, c, srv.Bucket)
	mustCheck(b, s)
	kPlain, kUpdate, kClaim := key(b)+"plain", key(b)+"update", key(b)+"claim"
	if err := errors.Join(plainPut(b, c, srv.Bucket, kPlain, value), s.Put(b.Context(), kUpdate, 7, value), s.Put(b.Context(), kClaim, 1, value)); err != nil {
		b.Fatal(err)
	}
	same := func(fence.Record) ([]byte, error) { return value, nil }
	var tPlain, tUpdate, tClaim time.Duration
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		err := plainReadModifyWrite(b, c, srv.Bucket, kPlain, value)
		t1 := time.Now()
		err = errors.Join(err, s.Update(b.Context(), kUpdate, 7, same))
		t2 := time.Now()
		err = errors.Join(err, s.Update(b.Context(), kClaim, fence.Token(i+2), same))
		tPlain, tUpdate, tClaim = tPlain+t1.Sub(t0), tUpdate+t2.Sub(t1), tClaim+time.Since(t2)
		if err != nil {
			b.Fatal(err)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(tPlain.Nanoseconds())/n, "plain-ns/op")
	b.ReportMetric(float64(tUpdate.Nanoseconds())/n, "update-ns/op")
	b.ReportMetric(float64(tClaim.Nanoseconds())/n, "claim-ns/op")
	b.ReportMetric(float64(tUpdate)/float64(tPlain), "update/plain")
	b.ReportMetric(float64(tClaim)/float64(tPlain), "claim/plain")
}

// plainReadModifyWrite reads the object under k whole, then replaces it
// with value, conditional on the ETag read: the unfenced baseline of
// Update.
func plainReadModifyWrite(b *testing.B, c *s3.Client, bucket, k string, value []byte) error {
	out, err := c.GetObject(b.Context(), &s3.GetObjectInput{Bucket: &bucket, Key: &k})
	if err != nil {
		return err
	}
	_, err = io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil {
		return err
	}
	_, err = c.PutObject(b.Context(), &s3.PutObjectInput{Bucket: &bucket, Key: &k, Body: bytes.NewReader(value), IfMatch: out.ETag})
	return err
}
