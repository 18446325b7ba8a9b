package query

import (
	"context"
	"testing"
)

// BenchmarkPermitterDo measures the cost of a permit and of handing the
// call to a worker goroutine, with one caller and with many.
func BenchmarkPermitterDo(b *testing.B) {
	ctx := context.Background()
	f := func() error { return nil }
	b.Run("serial", func(b *testing.B) {
		p := NewPermitter(100)
		defer p.Close()
		for b.Loop() {
			_ = p.Do(ctx, f)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		p := NewPermitter(4)
		defer p.Close()
		b.SetParallelism(64)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = p.Do(ctx, f)
			}
		})
	})
}
