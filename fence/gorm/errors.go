package gormfence

import (
	"gorm.io/gorm"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/errfamily"
)

// ErrInvalidArgument means a call was given something it cannot use: a
// nil *gorm.DB, context, model or function, a token <= 0, a model with no
// primary key value. Nothing was sent to the database. It matches
// [fence.ErrInvalidArgument]; [ErrNoFenceColumn] and [ErrNotRegistered]
// match it.
var ErrInvalidArgument = errfamily.New("gormfence: invalid argument", fence.ErrInvalidArgument)

// ErrNoFenceColumn means the model has no fence column: no field tagged
// gorm:"fence" and none whose column is named fence, or one that is not an
// integer. Add one, e.g. Fence int64 `gorm:"not null;default:0"`. Nothing
// was sent to the database. It matches [ErrInvalidArgument].
var ErrNoFenceColumn = errfamily.New("gormfence: the model has no fence column", ErrInvalidArgument)

// ErrNotRegistered means a fenced call was made on a *gorm.DB without the
// plugin: register it once with db.Use(gormfence.Plugin{}). Nothing was
// sent to the database. It matches [ErrInvalidArgument].
var ErrNotRegistered = errfamily.New("gormfence: the plugin is not registered; call db.Use(gormfence.Plugin{}) once after gorm.Open", ErrInvalidArgument)

// ErrRowNotFound means a fenced update or claim found no row matching its
// conditions (the model's primary key, and any Where): nothing was
// written. It matches [gorm.ErrRecordNotFound] too, and never
// [fence.ErrStale]: a row whose fence refused the write is stale, not
// missing.
var ErrRowNotFound = errfamily.New("gormfence: no row matches", gorm.ErrRecordNotFound)
