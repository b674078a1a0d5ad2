package gormfence_test

import (
	"context"
	"testing"

	"gorm.io/gorm"

	gormfence "github.com/fencelock/fencelock/fence/gorm"
	"github.com/fencelock/fencelock/internal/testkit/benchkit"
)

// BenchmarkFencedUpdate: a Fenced GORM update of one row against GORM's
// own update of the same row, the same again (an A/A check of the noise),
// run in turns in one run; and Update (a claim, fn, the fenced write, in a
// transaction) against what it replaces, a plain Take then Updates in a
// transaction. Goal on PostgreSQL: fenced/plain <= 1.15.
func BenchmarkFencedUpdate(b *testing.B) {
	for _, srv := range servers {
		b.Run(srv.name, func(b *testing.B) {
			db := srv.open(b)
			ctx := context.Background()
			mustCreate(b, db, "b", 0)
			mustCreate(b, db, "u", 0)
			n := int64(0)
			plain := func() error {
				n++
				return db.WithContext(ctx).Model(&Account{ID: "b"}).Update("balance", n).Error
			}
			ops := []func() error{
				plain,
				plain,
				func() error {
					n++
					return db.WithContext(ctx).Scopes(gormfence.Fenced(1)).Model(&Account{ID: "b"}).Update("balance", n).Error
				},
				func() error {
					return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
						a := Account{ID: "u"}
						if err := tx.Take(&a).Error; err != nil {
							return err
						}
						a.Balance++
						return tx.Select("*").Updates(&a).Error
					})
				},
				func() error {
					a := Account{ID: "u"}
					return gormfence.Update(ctx, db, 1, &a, func(*gorm.DB) error { a.Balance++; return nil })
				},
			}
			for _, op := range ops { // warm up
				if err := op(); err != nil {
					b.Fatal(err)
				}
			}
			total := benchkit.Interleave(b, ops...)
			names := []string{"plain", "plain-again", "fenced", "take-updates", "update"}
			for k, name := range names {
				b.ReportMetric(float64(total[k].Microseconds())/float64(b.N), name+"-µs/op")
			}
			b.ReportMetric(float64(total[1])/float64(total[0]), "plain-again/plain")
			b.ReportMetric(float64(total[2])/float64(total[0]), "fenced/plain")
			b.ReportMetric(float64(total[4])/float64(total[3]), "update/take-updates")
		})
	}
}
