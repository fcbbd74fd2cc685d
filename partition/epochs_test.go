package partition

import (
	"reflect"
	"testing"
)

// epochTestCase is one table row of the epoch cache tests.
type epochTestCase struct {
	name   string
	cache  epochCache
	epoch  int32
	offset int64
	want   epochCache
}

func TestEpochCache_Assign(t *testing.T) {
	base := epochCache{{1, 0}, {2, 5}}
	for _, tc := range []epochTestCase{
		{"empty", nil, 1, 0, epochCache{{1, 0}}},
		{"newer epoch appends", base, 4, 10, epochCache{{1, 0}, {2, 5}, {4, 10}}},
		{"same epoch later start is a no-op", base, 2, 7, base},
		{"same epoch earlier start moves it", base, 2, 3, epochCache{{1, 0}, {2, 3}}},
		{"newer epoch at a known start replaces it", base, 3, 5, epochCache{{1, 0}, {3, 5}}},
		{"newer epoch below known starts drops them", base, 3, 4, epochCache{{1, 0}, {3, 4}}},
		{"older epoch drops every newer one", base, 1, 8, epochCache{{1, 8}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := append(epochCache(nil), tc.cache...)
			if got := tc.cache.assign(tc.epoch, tc.offset); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("assign(%d, %d) = %v, want %v", tc.epoch, tc.offset, got, tc.want)
			}
			if !reflect.DeepEqual(tc.cache, before) {
				t.Fatalf("assign modified its receiver: %v, was %v", tc.cache, before)
			}
		})
	}
}

// TestEpochCache_NoteUnchanged pins note's append-only behaviour, which
// the raft Replica relies on, beside assign's.
func TestEpochCache_NoteUnchanged(t *testing.T) {
	c := epochCache{{1, 0}, {2, 5}}
	if got := c.note(2, 3); !reflect.DeepEqual(got, c) {
		t.Fatalf("note(2, 3) = %v, want %v", got, c)
	}
	if got := c.note(1, 8); !reflect.DeepEqual(got, c) {
		t.Fatalf("note(1, 8) = %v, want %v", got, c)
	}
}

func TestEpochCache_TruncateFrom(t *testing.T) {
	c := epochCache{{1, 0}, {2, 5}, {3, 9}}
	for _, tc := range []struct {
		off  int64
		want epochCache
	}{
		{10, c}, {9, epochCache{{1, 0}, {2, 5}}}, {6, epochCache{{1, 0}, {2, 5}}}, {5, epochCache{{1, 0}}}, {0, epochCache{}},
	} {
		if got := c.truncateFrom(tc.off); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("truncateFrom(%d) = %v, want %v", tc.off, got, tc.want)
		}
	}
}
