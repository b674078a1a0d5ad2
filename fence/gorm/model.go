package gormfence

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"
)

// fenceTag is the gorm tag setting that marks a model's fence field:
// gorm:"fence", or e.g. gorm:"column:version;fence".
const fenceTag = "FENCE"

// defaultColumn is the fence column of a model with no tagged field.
const defaultColumn = "fence"

// fenceField returns s's fence field: the one tagged gorm:"fence", else
// the one whose column is named fence. It must be an integer.
func fenceField(s *schema.Schema) (*schema.Field, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: no model; give one with Model(&row)", ErrNoFenceColumn)
	}
	var f *schema.Field
	for _, c := range s.Fields {
		if _, ok := c.TagSettings[fenceTag]; ok && c.DBName != "" {
			f = c
			break
		}
	}
	if f == nil {
		f = s.LookUpField(defaultColumn)
	}
	if f == nil || f.DBName == "" {
		return nil, fmt.Errorf("%w: %s has no field tagged gorm:\"fence\" and no column %q; add one: Fence int64 `gorm:\"not null;default:0\"`",
			ErrNoFenceColumn, s.Name, defaultColumn)
	}
	if f.DataType != schema.Int && f.DataType != schema.Uint {
		return nil, fmt.Errorf("%w: %s's fence field %s is %s, not an integer; declare it int64", ErrNoFenceColumn, s.Name, f.Name, f.DataType)
	}
	return f, nil
}

// resource names the row of v (a struct of s) in errors: the table and
// its primary key's values.
func resource(ctx context.Context, s *schema.Schema, table string, v reflect.Value) string {
	if s == nil {
		return table
	}
	if table == "" {
		table = s.Table
	}
	if v.Kind() != reflect.Struct || len(s.PrimaryFields) == 0 {
		return table
	}
	parts := make([]string, 0, len(s.PrimaryFields))
	for _, f := range s.PrimaryFields {
		pv, zero := f.ValueOf(ctx, v)
		if zero {
			return table
		}
		parts = append(parts, fmt.Sprint(pv))
	}
	return table + "/" + strings.Join(parts, "/")
}

// parseModel parses model's schema on db, refusing what a claim or an
// update cannot use: not a pointer to a struct, no fence column, no
// primary key value.
func parseModel(db *gorm.DB, model any) (*schema.Schema, *schema.Field, error) {
	v := reflect.ValueOf(model)
	if model == nil || v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil, nil, fmt.Errorf("%w: model %T: want a non-nil pointer to a struct (&row)", ErrInvalidArgument, model)
	}
	stmt := &gorm.Statement{DB: db}
	if err := stmt.Parse(model); err != nil {
		return nil, nil, fmt.Errorf("%w: model %T: %w", ErrInvalidArgument, model, err)
	}
	f, err := fenceField(stmt.Schema)
	if err != nil {
		return nil, nil, err
	}
	if len(stmt.Schema.PrimaryFields) == 0 {
		return nil, nil, fmt.Errorf("%w: %s has no primary key; a claim reads its row by it", ErrInvalidArgument, stmt.Schema.Name)
	}
	for _, pf := range stmt.Schema.PrimaryFields {
		if _, zero := pf.ValueOf(context.Background(), v.Elem()); zero {
			return nil, nil, fmt.Errorf("%w: %s's primary key %s is zero; set it to the row to claim", ErrInvalidArgument, stmt.Schema.Name, pf.Name)
		}
	}
	return stmt.Schema, f, nil
}
