package eventstore

// Healthy reports whether store can take writes: nil, or the error that
// made it stop (a backend that failed a write to its disk refuses every
// later append until it is reopened, while reads of what was durable go
// on). A server's health check answers with it, so that a load balancer
// takes a node whose store has failed out of the pool. Decorators that
// offer Unwrap() Store are looked through; a backend that never stops
// taking writes this way (it offers no Healthy method) is healthy.
func Healthy(store Store) error {
	for store != nil {
		if h, ok := store.(interface{ Healthy() error }); ok {
			return h.Healthy()
		}
		u, ok := store.(interface{ Unwrap() Store })
		if !ok {
			return nil
		}
		store = u.Unwrap()
	}
	return nil
}
