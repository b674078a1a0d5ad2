package jsfence_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

func TestScratchClusterCAS(t *testing.T) {
	kvs := clusterBucket(t)
	multi := 0
	for i := range 100 {
		k := fmt.Sprint("k", i)
		rev, err := kvs[0].Create(t.Context(), k, []byte("0"))
		if err != nil {
			t.Fatal(err)
		}
		var ok atomic.Int32
		var wg sync.WaitGroup
		for w := range 6 {
			wg.Go(func() {
				if _, err := kvs[w%3].Update(t.Context(), k, []byte(fmt.Sprint(w)), rev); err == nil {
					ok.Add(1)
				}
			})
		}
		wg.Wait()
		if ok.Load() > 1 {
			multi++
		}
	}
	t.Logf("%d of 100 rounds: more than one of 6 kv.Update on one revision landed", multi)
}
