package kafka

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// apiVersionsKey is ApiVersions, whose response header is always v0 and
// whose unsupported versions Kafka answers in a fixed way.
const apiVersionsKey = 18

// apiTable answers "is (key, version) served" with one slice index.
type apiTable struct {
	byKey  []APIRange // indexed by key; MaxVersion -1 when not served
	sorted []APIRange
}

// newAPITable checks the handler's ranges: keys kmsg knows, no duplicate,
// 0 <= min <= max <= kmsg's max, so every served request can be decoded.
func newAPITable(apis []APIRange) (apiTable, error) {
	var t apiTable
	for _, a := range apis {
		if err := checkRange(a); err != nil {
			return apiTable{}, err
		}
		for int(a.Key) >= len(t.byKey) {
			t.byKey = append(t.byKey, APIRange{Key: int16(len(t.byKey)), MinVersion: 0, MaxVersion: -1})
		}
		if t.byKey[a.Key].MaxVersion >= 0 {
			return apiTable{}, fmt.Errorf("kafka handler: api key %d listed twice", a.Key)
		}
		t.byKey[a.Key] = a
		t.sorted = append(t.sorted, a)
	}
	slices.SortFunc(t.sorted, func(a, b APIRange) int { return int(a.Key) - int(b.Key) })
	return t, nil
}

func checkRange(a APIRange) error {
	req := kmsg.RequestForKey(a.Key)
	if req == nil {
		return fmt.Errorf("kafka handler: api key %d unknown to kmsg", a.Key)
	}
	if a.MinVersion < 0 || a.MinVersion > a.MaxVersion || a.MaxVersion > req.MaxVersion() {
		return fmt.Errorf("kafka handler: %s versions %d-%d outside 0-%d", kmsg.NameForKey(a.Key), a.MinVersion, a.MaxVersion, req.MaxVersion())
	}
	return nil
}

// lookup returns key's range and whether version is inside it.
func (t apiTable) lookup(key, version int16) (APIRange, bool) {
	if key < 0 || int(key) >= len(t.byKey) {
		return APIRange{}, false
	}
	r := t.byKey[key]
	return r, r.MaxVersion >= 0 && version >= r.MinVersion && version <= r.MaxVersion
}

// get returns key's range if the key is served at all.
func (t apiTable) get(key int16) (APIRange, bool) {
	if key < 0 || int(key) >= len(t.byKey) || t.byKey[key].MaxVersion < 0 {
		return APIRange{}, false
	}
	return t.byKey[key], true
}

// APIKeys turns ranges into the ApiKeys list of an ApiVersions response,
// sorted by key, so the broker advertises exactly what the server admits.
func APIKeys(apis []APIRange) []kmsg.ApiVersionsResponseApiKey {
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(apis))
	for _, a := range apis {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.Key, a.MinVersion, a.MaxVersion
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b kmsg.ApiVersionsResponseApiKey) int { return int(a.ApiKey) - int(b.ApiKey) })
	return out
}
