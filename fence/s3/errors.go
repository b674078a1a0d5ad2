package s3fence

import (
	"errors"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/errfamily"
)

// ErrConflict means a [Store.Put] gave up after its conditional PUTs kept
// failing because other writers changed the object between its read and its
// write ([WithMaxAttempts] times in a row), or a [Store.Update] or
// [Store.GetForUpdate] did ([fence.UpdateAttempts] reads and conditional
// PUTs). Nothing the call sent was written, except, for Update, its claim
// (see [Store.Update]): the last read showed another writer's version. The
// error also wraps the last PreconditionFailed or ConditionalRequestConflict
// error. Retrying later may succeed. It matches [fence.ErrConflict].
var ErrConflict = errfamily.New("s3fence: conflict retries exhausted: other writers kept changing the object", fence.ErrConflict)

// ErrNoSuchBucket means the store's bucket does not exist. The error also
// wraps the AWS SDK's error.
var ErrNoSuchBucket = errors.New("s3fence: no such bucket")

// ErrAccessDenied means the server refused the credentials or the operation
// (HTTP 403: AccessDenied, InvalidAccessKeyId, SignatureDoesNotMatch, …). The
// error also wraps the AWS SDK's error. Note that S3 answers a read of a
// missing key with 403 rather than 404 when the caller lacks s3:ListBucket,
// which fenced writes to new keys need.
var ErrAccessDenied = errors.New("s3fence: access denied")

// ErrForeignObject means an object exists under the key but does not start
// with this package's envelope (see the package documentation): something
// else wrote it. Put refuses to overwrite it, since its token is unknown, and
// Get refuses to return it.
var ErrForeignObject = errors.New("s3fence: object has no fencing envelope (not written by fence/s3)")

// ErrConditionalUnsupported means the server does not honour conditional
// writes (If-Match and If-None-Match on PutObject, or on
// CompleteMultipartUpload for a multipart write), so a [Store] cannot fence
// writes through it: a PUT was answered 501 NotImplemented, or
// [Store.CheckConditionalWrites] (or [Store.CheckMultipartConditionalWrites])
// saw the server apply a write whose condition did not hold. Nothing was written, except the check's probe object. The
// error wraps the AWS SDK's error when there is one. Retrying cannot help;
// use a server, or a proxy, that honours the conditions.
var ErrConditionalUnsupported = errors.New("s3fence: server does not honour conditional writes")

// ErrInvalidArgument means a call was given something it cannot use: a nil
// client (a typed nil too), a nil context, an empty bucket name, a nil
// function for [Store.Update], a nil or unseekable value for
// [Store.PutReader], or a value that needs a multipart upload with a client
// that is not a [MultipartClient]. Nothing was sent to the server. Retrying cannot help; fix the call. It matches
// [fence.ErrInvalidArgument], and [ErrInvalidOption] matches it.
var ErrInvalidArgument = errfamily.New("s3fence: invalid argument", fence.ErrInvalidArgument)

// ErrInvalidOption means an [Option] given to [New], or a [PutOption] given
// to [Store.PutWith] or [WithPutDefaults], was nil or had an invalid value.
// New returned no Store, or the write sent nothing. Retrying cannot help; fix
// the option.
var ErrInvalidOption = errfamily.New("s3fence: invalid option", ErrInvalidArgument)
