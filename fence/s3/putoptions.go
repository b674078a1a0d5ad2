package s3fence

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// PutOption sets fields of the PutObject requests of a write: one
// [Store.PutWith] call, or every write of a Store ([WithPutDefaults]).
// Create one with the With… functions below; the interface is sealed. An
// invalid one fails the write before any I/O (or [New], given through
// [WithPutDefaults]) with an error matching [ErrInvalidOption].
type PutOption interface {
	applyPut(*s3.PutObjectInput) error
}

type putOptionFunc func(*s3.PutObjectInput) error

func (f putOptionFunc) applyPut(in *s3.PutObjectInput) error { return f(in) }

// WithContentType sets the object's Content-Type. Default: none sent, which
// S3 stores as binary/octet-stream. It describes the value; readers of the
// raw object see the 32-byte envelope first (see the package documentation).
func WithContentType(contentType string) PutOption {
	return putOptionFunc(func(in *s3.PutObjectInput) error {
		in.ContentType = &contentType
		return nil
	})
}

// WithMetadata adds user metadata (x-amz-meta-*) to the object. Default:
// only [MetadataToken], which the Store sets itself and which m must not
// contain.
func WithMetadata(m map[string]string) PutOption {
	return putOptionFunc(func(in *s3.PutObjectInput) error {
		for k := range m {
			if strings.EqualFold(k, MetadataToken) {
				return fmt.Errorf("%w: WithMetadata: key %q is the Store's own", ErrInvalidOption, k)
			}
		}
		if in.Metadata == nil {
			in.Metadata = make(map[string]string, len(m)+1)
		}
		maps.Copy(in.Metadata, m)
		return nil
	})
}

// WithTagging sets the object's tags, URL-encoded as S3 expects
// ("project=a&team=b"). Default: no tags.
func WithTagging(tagging string) PutOption {
	return putOptionFunc(func(in *s3.PutObjectInput) error {
		in.Tagging = &tagging
		return nil
	})
}

// WithStorageClass sets the object's storage class. Default: the bucket's
// (STANDARD). Classes whose objects must be restored before a GET (GLACIER,
// DEEP_ARCHIVE) make the object unreadable to the next Put's read, which
// then fails: do not use them for fenced keys.
func WithStorageClass(class types.StorageClass) PutOption {
	return putOptionFunc(func(in *s3.PutObjectInput) error {
		in.StorageClass = class
		return nil
	})
}

// WithServerSideEncryption asks for server-side encryption: SSE-S3
// (types.ServerSideEncryptionAes256) or SSE-KMS
// (types.ServerSideEncryptionAwsKms, with kmsKeyID, or "" for the account's
// default key). Default: the bucket's default encryption. For SSE-C, whose
// key every read needs too, use the Store option [WithSSECustomerKey].
func WithServerSideEncryption(sse types.ServerSideEncryption, kmsKeyID string) PutOption {
	return putOptionFunc(func(in *s3.PutObjectInput) error {
		in.ServerSideEncryption = sse
		if kmsKeyID != "" {
			in.SSEKMSKeyId = &kmsKeyID
		}
		return nil
	})
}

// WithPutInput lets fn set any other field of the PutObjectInput (an ACL,
// Cache-Control, an object lock, ...). It runs after the other options.
// Fields the Store owns must be left alone, or the write fails before any
// I/O: Bucket, Key, Body, ContentLength, IfMatch, IfNoneMatch, Content-MD5
// and the checksum values (set ChecksumAlgorithm instead: the SDK computes
// it over the bytes sent), and the SSE-C fields ([WithSSECustomerKey]). A
// write sent as a multipart upload ([Store.PutReader]) carries these
// settings in its CreateMultipartUpload; one that has no counterpart there
// (WriteOffsetBytes) fails such a write before any I/O.
func WithPutInput(fn func(*s3.PutObjectInput)) PutOption {
	return putOptionFunc(func(in *s3.PutObjectInput) error {
		if fn == nil {
			return fmt.Errorf("%w: WithPutInput: nil function", ErrInvalidOption)
		}
		fn(in)
		return nil
	})
}

// putInput returns the template of a write's PutObject requests: the
// store's defaults, then opts, then the token's metadata.
func (s *Store) putInput(tok string, opts []PutOption) (*s3.PutObjectInput, error) {
	in, err := applyPutOptions(s.opts.putDefaults, opts...)
	if err != nil {
		return nil, err
	}
	if in.Metadata == nil {
		in.Metadata = make(map[string]string, 1)
	}
	in.Metadata[MetadataToken] = tok
	in.ExpectedBucketOwner = s.owner()
	return in, nil
}

// applyPutOptions applies defaults, then opts, to a new PutObjectInput, and
// refuses a nil option or one that sets a field the Store owns.
func applyPutOptions(defaults []PutOption, opts ...PutOption) (*s3.PutObjectInput, error) {
	in := &s3.PutObjectInput{}
	for _, o := range slices.Concat(defaults, opts) {
		if o == nil {
			return nil, fmt.Errorf("%w: nil PutOption", ErrInvalidOption)
		}
		if err := o.applyPut(in); err != nil {
			return nil, err
		}
	}
	if err := checkOwnedFields(in); err != nil {
		return nil, err
	}
	return in, nil
}

// ownedFields are the PutObjectInput fields the Store sets itself: a user's
// value for them would break fencing or not match the bytes sent.
var ownedFields = []string{"Bucket", "Key", "Body", "ContentLength", "IfMatch", "IfNoneMatch", "ContentMD5",
	"SSECustomerAlgorithm", "SSECustomerKey", "SSECustomerKeyMD5"}

// checkOwnedFields refuses an input that sets a field the Store owns.
func checkOwnedFields(in *s3.PutObjectInput) error {
	v := reflect.ValueOf(in).Elem()
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		owned := slices.Contains(ownedFields, name) || strings.HasPrefix(name, "Checksum") && name != "ChecksumAlgorithm"
		if owned && !v.Field(i).IsZero() {
			return fmt.Errorf("%w: PutOption sets PutObjectInput.%s, which the Store sets itself", ErrInvalidOption, name)
		}
	}
	return nil
}
