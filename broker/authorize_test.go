package broker

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAuthzRules_EveryRoute: every API the handler routes has an
// authorization decision, and no decision names an API not routed, so
// that a newly routed API cannot skip authorization unnoticed.
func TestAuthzRules_EveryRoute(t *testing.T) {
	n := &Node{metrics: newMetrics()}
	n.handler()
	routed := map[int16]bool{}
	for _, a := range n.apis {
		routed[a.Key] = true
		r, ok := authzRules[a.Key]
		if !ok {
			t.Errorf("%s is routed without an authorization rule (authorize_rules.go)", kmsg.NameForKey(a.Key))
			continue
		}
		if !r.open && !r.inHandler && r.whole == nil && r.item == nil && r.after == nil {
			t.Errorf("%s: an empty rule", kmsg.NameForKey(a.Key))
		}
		if r.item != nil && !hasList(kmsg.RequestForKey(a.Key), r.lists) {
			t.Errorf("%s: the request has none of the lists %v", kmsg.NameForKey(a.Key), r.lists)
		}
	}
	for key := range authzRules {
		if !routed[key] {
			t.Errorf("a rule for %s, which is not routed", kmsg.NameForKey(key))
		}
	}
}

func hasList(req kmsg.Request, lists []string) bool {
	v := reflect.ValueOf(req).Elem()
	for _, l := range lists {
		if f := v.FieldByName(l); f.IsValid() && f.Kind() == reflect.Slice {
			return true
		}
	}
	return false
}
