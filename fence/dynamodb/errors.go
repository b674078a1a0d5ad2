package dynamofence

import (
	"errors"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/errfamily"
)

// ErrInvalidArgument means a call was given something it cannot use: a nil
// client (a typed nil too), a nil context, an empty table or attribute
// name, an empty item key, an update that names the token attribute.
// Nothing was sent. Retrying cannot help; fix the call. It matches
// [fence.ErrInvalidArgument], and [ErrInvalidOption] and [ErrNoTable]
// match it.
var ErrInvalidArgument = errfamily.New("dynamofence: invalid argument", fence.ErrInvalidArgument)

// ErrInvalidOption means an [Option] was nil or had an invalid value. No
// Store or Table was returned.
var ErrInvalidOption = errfamily.New("dynamofence: invalid option", ErrInvalidArgument)

// ErrNoTable means DynamoDB answered that the table does not exist
// (ResourceNotFoundException). Nothing was written. The error wraps the
// SDK's. It matches [ErrInvalidArgument]: the call names a table to create
// first.
var ErrNoTable = errfamily.New("dynamofence: no such table", ErrInvalidArgument)

// ErrCorrupt means an item holds what this package did not write: a token
// or floor attribute that is not a token, a value that is not binary. A
// Put or Delete changed nothing; a GetForUpdate or Update may have raised
// the floor (its claim) before it read the record.
var ErrCorrupt = errors.New("dynamofence: item not in the format this package writes")

// ErrConditionsUnsupported means the server applied a write whose
// condition did not hold ([Store.CheckConditions]): it is no DynamoDB, or a
// compatible server that ignores conditions, and cannot fence anything.
var ErrConditionsUnsupported = errors.New("dynamofence: server does not honour conditional writes")

// ErrTooLarge means a value would make its item larger than DynamoDB's
// item limit, 400 KB ([MaxItemSize]) counting the key and this package's
// attributes: refused before anything was sent, since DynamoDB would
// refuse the write. It matches [ErrInvalidArgument]. For larger values,
// store them elsewhere (S3, fence/s3) and fence a pointer to them here.
var ErrTooLarge = errfamily.New("dynamofence: value too large for a DynamoDB item", ErrInvalidArgument)
