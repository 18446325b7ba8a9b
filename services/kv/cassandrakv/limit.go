package cassandrakv

// ValueLimit is the largest value the backend stores: Cassandra refuses a
// mutation over half its commit log segment (commitlog_segment_size, 32
// MiB by default, so 16 MiB), with room left for the row around the
// value. A value is one cell of one mutation, so Cassandra does not take
// values of 100 MB; it would take splitting them into chunks of rows,
// which this backend does not do.
func (b *Backend) ValueLimit() (int64, string) {
	return 15 << 20, "Cassandra refuses a mutation over half its commit log segment, 16 MiB by default"
}
