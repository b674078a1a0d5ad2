package gormfence

import (
	"fmt"

	"gorm.io/gorm"

	"github.com/fencelock/fencelock/fence"
)

// markKey is the Statement setting that [Fenced] leaves for the
// plugin's callbacks.
const markKey = "fencelock:gormfence:token"

// Fenced returns a scope that makes an update fenced with token:
//
//	err := db.WithContext(ctx).Scopes(gormfence.Fenced(token)).
//		Model(&acct).Update("balance", 120).Error
//
// The plugin ([Plugin]) then adds the fence predicate to the update's
// conditions and sets the fence column to token, in the one statement:
//
//	UPDATE accounts SET balance = ?, fence = ? WHERE id = ? AND fence <= ?
//
// (in MySQL, fence = LAST_INSERT_ID(?), which tells a matched row from a
// refused one whatever the affected-rows count says). A row whose fence is
// higher is left as it was, and the update fails with an error matching
// [fence.ErrStale] (a [*fence.StaleError] with the row's fence as
// Current); no matching row at all is [ErrRowNotFound]. Both are told
// apart by a read of the row after an update that changed none. On
// success the model's fence field is set to token.
//
// The update must name its row (the model's primary key, or Where
// conditions): Fenced refuses an update with no condition, which the
// fence predicate would otherwise turn into an update of every row below
// the token. Conditions that are not the model's primary key may match
// several rows: the update is then stale if it left any of them at a
// higher fence (a read after it lands tells), and GORM's default
// transaction rolls back the rows it changed. The fence column is set by
// Fenced whatever the values say.
// A failure of the statement is classified as fence/sql classifies its
// own ([sqlfence.ErrRetryable], [sqlfence.ErrSchema]); one whose outcome
// cannot be known (the connection broke, or the context ended, after it
// was sent) matches [fence.ErrUnknownOutcome], outside a transaction.
//
// A token <= 0, a model with no fence column ([ErrNoFenceColumn]) and a
// *gorm.DB without the plugin ([ErrNotRegistered]) fail before anything
// is sent. Fenced on a create, delete or query fails the same way: only
// updates are fenced.
func Fenced(token fence.Token) func(*gorm.DB) *gorm.DB {
	return func(db *gorm.DB) *gorm.DB {
		if err := token.Validate(); err != nil {
			_ = db.AddError(fmt.Errorf("gormfence: Fenced(%d): %w", token, err))
			return db
		}
		if _, ok := db.Config.Plugins[pluginName]; !ok {
			_ = db.AddError(ErrNotRegistered)
			return db
		}
		db.Statement.Settings.Store(markKey, token)
		return db
	}
}

// markOf returns the token [Fenced] marked stmt with.
func markOf(stmt *gorm.Statement) (fence.Token, bool) {
	v, ok := stmt.Settings.Load(markKey)
	if !ok {
		return 0, false
	}
	tok, ok := v.(fence.Token)
	return tok, ok
}
