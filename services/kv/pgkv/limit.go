package pgkv

// ValueLimit is the largest value the backend stores: a PostgreSQL field
// (bytea) holds at most 1 GB, and so does one protocol message. The
// backend holds a value whole as it writes or reads it (the repository's
// MaxValueBytes, and the HTTP API's MaxLargeWrites, bound that).
func (b *Backend) ValueLimit() (int64, string) {
	return 1<<30 - 1<<20, "a PostgreSQL bytea field holds at most 1 GB"
}
