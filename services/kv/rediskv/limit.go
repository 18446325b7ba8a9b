package rediskv

// ValueLimit is the largest value the backend stores: Redis refuses a
// bulk string over its proto-max-bulk-len, 512 MB by default. The backend
// holds a value whole as it writes or reads it (the repository's
// MaxValueBytes, and the HTTP API's MaxLargeWrites, bound that), and so
// does the server, in memory.
func (b *Backend) ValueLimit() (int64, string) {
	return 512 << 20, "Redis takes strings of at most proto-max-bulk-len, 512 MB by default"
}
