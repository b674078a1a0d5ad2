package azblobfence

import (
	"errors"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/errfamily"
)

// ErrInvalidArgument means a call was given something it cannot use: a nil
// container client, a nil context, a nil function for [Store.Update], a
// key Azure does not take. Nothing was sent. It matches
// [fence.ErrInvalidArgument], and [ErrInvalidOption] and [ErrNoContainer]
// match it.
var ErrInvalidArgument = errfamily.New("azblobfence: invalid argument", fence.ErrInvalidArgument)

// ErrInvalidOption means an [Option] given to [New] was nil or invalid.
// New returned no Store.
var ErrInvalidOption = errfamily.New("azblobfence: invalid option", ErrInvalidArgument)

// ErrNoContainer means the store's container does not exist
// (ContainerNotFound). Nothing was written. It matches
// [ErrInvalidArgument]: create the container first.
var ErrNoContainer = errfamily.New("azblobfence: no such container", ErrInvalidArgument)

// ErrForeignBlob means a blob under the key carries no fencelock metadata
// (see the package documentation): something else wrote it, or replaced
// its metadata. Put refuses to overwrite it, since its token is unknown,
// and Get refuses to return it. The call changed nothing.
var ErrForeignBlob = errors.New("azblobfence: blob has no fencelock metadata (not written by fence/azblob)")

// ErrConditionalUnsupported means the server, or a proxy in front of it,
// applied a write whose If-Match or If-None-Match did not hold
// ([Store.CheckConditionalWrites]): it cannot fence anything, so a Store
// refuses to write through it. Nothing was written but the check's probe
// blob. Retrying cannot help.
var ErrConditionalUnsupported = errors.New("azblobfence: server does not honour If-Match and If-None-Match on Put Blob")

// ErrTooLarge means a value is longer than [MaxValueSize], more than one
// Put Blob takes. It is returned before the value is sent; nothing was
// written. It matches [ErrInvalidArgument].
var ErrTooLarge = errfamily.New("azblobfence: value too large for one Put Blob", ErrInvalidArgument)
