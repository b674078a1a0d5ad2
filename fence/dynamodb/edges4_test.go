package dynamofence_test

import (
	"context"
	"testing"

	dynamofence "github.com/fencelock/fencelock/fence/dynamodb"
)

func TestReviewCreateStoreTableNilContext(t *testing.T) {
	c := client(t)
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("CreateStoreTable(nil ctx) panicked: %v", p)
		}
	}()
	var ctx context.Context
	t.Logf("err: %v", dynamofence.CreateStoreTable(ctx, c, "x_review", "key"))
}

// WithKeyAttribute naming one of the Store's own attributes is accepted by New.
func TestReviewKeyAttributeCollides(t *testing.T) {
	c := client(t)
	if err := dynamofence.CreateStoreTable(t.Context(), c, "review_collide", "fence_value"); err != nil {
		t.Fatal(err)
	}
	s, err := dynamofence.New(c, "review_collide", dynamofence.WithKeyAttribute("fence_value"))
	if err != nil {
		t.Logf("New refused: %v", err)
		return
	}
	err = s.Put(t.Context(), "k", 5, []byte("v"))
	r, gerr := s.Get(t.Context(), "k")
	t.Fatalf("New accepted WithKeyAttribute(\"fence_value\"): Put: %v; Get: %+v %v", err, r, gerr)
}
