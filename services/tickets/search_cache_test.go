package tickets

import "testing"

// TestSearchCacheBoundedByBytes: many distinct queries with large
// answers (1,000 listings each) keep the answer cache within its byte
// bound — an entry count alone let 4,096 answers of ~100 KB each hold
// hundreds of MiB.
func TestSearchCacheBoundedByBytes(t *testing.T) {
	cat := Catalogue{Sports: Sports(4), PerSport: 2000, Days: 1}
	s := NewSearch(cat)
	var largest int
	for _, sport := range cat.Sports {
		for limit := MaxLimit - 150; limit <= MaxLimit; limit++ {
			body, err := s.FindJSON(Query{Sport: sport, Available: true, Limit: limit})
			if err != nil {
				t.Fatal(err)
			}
			largest = max(largest, len(body))
		}
	}
	s.cacheMu.RLock()
	total := 0
	for _, c := range s.cache {
		total += len(c.body)
	}
	entries := len(s.cache)
	s.cacheMu.RUnlock()
	t.Logf("%d answers of up to %d bytes cached, %d bytes in all", entries, largest, total)
	if total > maxCachedBytes {
		t.Fatalf("the search cache holds %d bytes, over its bound of %d", total, maxCachedBytes)
	}
	if entries == 0 {
		t.Fatal("nothing cached")
	}
}
