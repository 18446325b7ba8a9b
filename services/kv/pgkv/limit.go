package pgkv

// ValueLimit is the largest value the backend stores: a PostgreSQL field
// (bytea) holds at most 1 GB, and so does one protocol message, which
// bounds a value put whole (Add, Update) and read whole (Get). A value
// put from a stream over InlineMax goes into a large object and is never
// held whole by the backend; the 1 GB applies to it too, so that Get can
// still return it.
func (b *Backend) ValueLimit() (int64, string) {
	return 1<<30 - 1<<20, "a PostgreSQL bytea field holds at most 1 GB"
}
