package flights

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
)

// hugeSchedule is a small SSIM file whose records each fly daily for a
// century: n records expand into n × 36,524 dated legs.
func hugeSchedule(t *testing.T, n int) []byte {
	t.Helper()
	src, err := os.ReadFile("ssim/testdata/basic.ssim")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(src), "\n")
	var b bytes.Buffer
	for _, l := range lines[:10] { // header, zero lines, carrier
		if strings.HasPrefix(l, "2") {
			l = strings.Replace(l, "29MAR2624OCT26", "01JAN7031DEC69", 1)
		}
		b.WriteString(l + "\n")
	}
	tmpl := []byte(lines[10])
	for i := range n {
		rec := append([]byte(nil), tmpl...)
		copy(rec[5:9], fmt.Sprintf("%4d", 1000+i))
		copy(rec[14:28], "01JAN7031DEC69")
		copy(rec[28:35], "1234567")
		copy(rec[194:200], fmt.Sprintf("%06d", 11+i))
		b.Write(rec)
		b.WriteString("\n")
	}
	return b.Bytes()
}

// An import that would expand beyond its limit of dated legs is refused
// while it reads, before it holds them all.
func TestImportRefusesHugeExpansion(t *testing.T) {
	svc, _ := newService(t)
	sched := hugeSchedule(t, 200) // 7.3 million dated legs
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Import(context.Background(), svc, bytes.NewReader(sched), nil, ImportOptions{MaxLegs: 100_000})
	if !errors.Is(err, ErrTooManyLegs) {
		t.Fatalf("import of 7.3M dated legs with a limit of 100,000: %v, want ErrTooManyLegs", err)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 200<<20 {
		t.Fatalf("the refused import grew the heap by %d MiB", grew>>20)
	}
	if head, _ := svc.Store.Head(context.Background()); head != 0 {
		t.Fatalf("the refused import wrote %d events", head)
	}
	if DefaultMaxImportLegs <= 0 || DefaultMaxImportLegs > 2_000_000 {
		t.Fatalf("DefaultMaxImportLegs = %d", DefaultMaxImportLegs)
	}
}
