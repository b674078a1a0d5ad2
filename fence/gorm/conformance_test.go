package gormfence_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/fencetest"
	gormfence "github.com/fencelock/fencelock/fence/gorm"
)

// kvRow is a key-value row written only through gormfence: a Put is a
// Fenced update, a GetForUpdate a Claim, so that fencetest's cases check
// them against the real servers.
type kvRow struct {
	Key   string `gorm:"primaryKey;size:191"`
	Value []byte
	Has   bool  // false: no value yet (the row only holds a floor)
	Token int64 `gorm:"not null;default:0;fence"` // tagged: the column is not named fence
}

// kvStore is a [fence.Store] and [fence.Updater] over kvRow.
type kvStore struct{ db *gorm.DB }

var (
	_ fence.Store   = kvStore{}
	_ fence.Updater = kvStore{}
)

// ensure creates key's row, at floor 0 and with no value, if it is not
// there: the fenced statements update rows, they do not insert.
func (s kvStore) ensure(ctx context.Context, key string) error {
	return s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&kvRow{Key: key}).Error
}

func (s kvStore) Put(ctx context.Context, key string, token fence.Token, value []byte) error {
	if key == "" {
		return fence.ErrInvalidKey
	}
	if err := token.Validate(); err != nil {
		return err
	}
	if err := s.ensure(ctx, key); err != nil {
		return err
	}
	if value == nil {
		value = []byte{}
	}
	return s.db.WithContext(ctx).Scopes(gormfence.Fenced(token)).Model(&kvRow{Key: key}).
		Updates(map[string]any{"value": value, "has": true}).Error
}

func (s kvStore) Get(ctx context.Context, key string) (fence.Record, error) {
	if key == "" {
		return fence.Record{}, fence.ErrInvalidKey
	}
	var r kvRow
	err := s.db.WithContext(ctx).Where(map[string]any{"key": key}).Take(&r).Error
	if err == nil && !r.Has || errors.Is(err, gorm.ErrRecordNotFound) {
		return fence.Record{}, fmt.Errorf("%w: %q", fence.ErrNotFound, key)
	}
	if err != nil {
		return fence.Record{}, err
	}
	return fence.Record{Value: nonNil(r.Value), Token: fence.Token(r.Token)}, nil
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func (s kvStore) GetForUpdate(ctx context.Context, key string, token fence.Token) (fence.Record, error) {
	if err := fence.CheckRead(ctx, key, token); err != nil {
		return fence.Record{}, err
	}
	r, _, err := kvRounds(s).ClaimRead(ctx, key, token)
	return r, err
}

func (s kvStore) Update(ctx context.Context, key string, token fence.Token, fn fence.UpdateFunc) error {
	return fence.RunUpdate(ctx, kvRounds(s), key, token, fn)
}

// kvRounds is fence's read-compute-write loop over a Claim and a Fenced
// update whose conditions also hold the value read.
type kvRounds kvStore

type kvRead struct {
	value []byte
	has   bool
}

func (s kvRounds) ClaimRead(ctx context.Context, key string, token fence.Token) (fence.Record, kvRead, error) {
	if err := kvStore(s).ensure(ctx, key); err != nil {
		return fence.Record{}, kvRead{}, err
	}
	r := kvRow{Key: key}
	if err := gormfence.Claim(ctx, s.db, token, &r); err != nil {
		return fence.Record{}, kvRead{}, err
	}
	if !r.Has {
		return fence.Record{}, kvRead{}, fmt.Errorf("%w: %q (claimed)", fence.ErrNotFound, key)
	}
	return fence.Record{Value: nonNil(r.Value), Token: token}, kvRead{value: bytes.Clone(nonNil(r.Value)), has: true}, nil
}

func (s kvRounds) WriteIf(ctx context.Context, key string, token fence.Token, old kvRead, v []byte) error {
	q := s.db.WithContext(ctx).Scopes(gormfence.Fenced(token)).Model(&kvRow{Key: key}).Where("has = ?", old.has)
	if old.has {
		q = q.Where("value = ?", old.value)
	}
	err := q.Updates(map[string]any{"value": nonNil(v), "has": true}).Error
	if errors.Is(err, gormfence.ErrRowNotFound) {
		return fence.ErrChanged
	}
	return err
}

// TestConformance runs fencetest against the Fenced scope and Claim on
// every server.
func TestConformance(t *testing.T) {
	eachServer(t, func(t *testing.T, db *gorm.DB) {
		if err := db.AutoMigrate(&kvRow{}); err != nil {
			t.Fatal(err)
		}
		s := kvStore{db: db}
		fencetest.Run(t, func(*testing.T) fence.Store { return s })
	})
}
