package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	s3fence "github.com/fencelock/fencelock/fence/s3"
	"github.com/fencelock/fencelock/internal/app/harness/check"
)

// readS3 reads every version of the run's objects from the versioned
// bucket, oldest first. The order is the listing's: S3 lists the versions of
// a key newest first (version IDs are opaque; only some servers make them
// sortable).
func readS3(ctx context.Context, h *check.Storage, c *s3.Client, bucket, prefix string) error {
	versions, err := listVersions(ctx, c, bucket, prefix)
	if err != nil {
		return err
	}
	for _, v := range oldestFirst(versions) {
		r, err := readVersion(ctx, c, bucket, *v.Key, *v.VersionId)
		if err != nil {
			return err
		}
		res := check.ResourceName(check.ResS3, *v.Key)
		h.Writes[res] = append(h.Writes[res], r)
		if aws.ToBool(v.IsLatest) {
			h.Final[res] = r.Value
		}
	}
	return nil
}

// oldestFirst reverses the listing's order within each key.
func oldestFirst(versions []types.ObjectVersion) []types.ObjectVersion {
	byKey := map[string][]types.ObjectVersion{}
	var keys []string
	for _, v := range versions {
		if _, ok := byKey[*v.Key]; !ok {
			keys = append(keys, *v.Key)
		}
		byKey[*v.Key] = append(byKey[*v.Key], v)
	}
	var out []types.ObjectVersion
	for _, k := range keys {
		vs := byKey[k]
		slices.Reverse(vs)
		out = append(out, vs...)
	}
	return out
}

func listVersions(ctx context.Context, c *s3.Client, bucket, prefix string) ([]types.ObjectVersion, error) {
	var all []types.ObjectVersion
	in := &s3.ListObjectVersionsInput{Bucket: &bucket, Prefix: &prefix}
	for {
		out, err := c.ListObjectVersions(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("harness: listing object versions: %w", err)
		}
		all = append(all, out.Versions...)
		if !aws.ToBool(out.IsTruncated) {
			return all, nil
		}
		in.KeyMarker, in.VersionIdMarker = out.NextKeyMarker, out.NextVersionIdMarker
	}
}

// readObject reads the current value of an object, "" when there is none.
func readObject(ctx context.Context, c *s3.Client, bucket, key string) (string, error) {
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	var nsk *types.NoSuchKey
	if errors.As(err, &nsk) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	r, err := decodeObject(out)
	return r.Value, err
}

// readVersion reads one version: a fence/s3 envelope, or in the control a
// plain value with its token in metadata.
func readVersion(ctx context.Context, c *s3.Client, bucket, key, version string) (check.Record, error) {
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key, VersionId: &version})
	if err != nil {
		return check.Record{}, fmt.Errorf("harness: reading %s version %s: %w", key, version, err)
	}
	return decodeObject(out)
}

func decodeObject(out *s3.GetObjectOutput) (check.Record, error) {
	defer out.Body.Close()
	body, err := io.ReadAll(out.Body)
	if err != nil {
		return check.Record{}, err
	}
	if rec, err := s3fence.Decode(body); err == nil {
		return check.Record{Token: int64(rec.Token), Value: string(rec.Value)}, nil
	}
	// The control's plain PUTs carry the token in metadata only; without it
	// the order check would silently compare zeros.
	tok, err := strconv.ParseInt(out.Metadata[s3fence.MetadataToken], 10, 64)
	if err != nil {
		return check.Record{}, fmt.Errorf("object without envelope has no readable %s metadata: %w", s3fence.MetadataToken, err)
	}
	return check.Record{Token: tok, Value: string(body)}, nil
}
