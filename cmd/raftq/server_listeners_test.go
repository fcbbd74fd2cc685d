package main

import (
	"errors"
	"reflect"
	"testing"

	"github.com/raftq/raftq/broker"
)

func TestListenerFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    listenerFlags
		want []broker.Listener
		bad  bool
	}{
		{name: "none", f: listenerFlags{}},
		{name: "protocol from the name", f: listenerFlags{listeners: []string{"SASL_PLAINTEXT://127.0.0.1:9093"}},
			want: []broker.Listener{{Name: "SASL_PLAINTEXT", Addr: "127.0.0.1:9093", Protocol: "SASL_PLAINTEXT"}}},
		{name: "map and advertised", f: listenerFlags{listeners: []string{"EXT://0.0.0.0:9093", "INT://127.0.0.1:9094"},
			advertised: []string{"EXT://kafka.example:9093"}, protocols: []string{"EXT:SASL_PLAINTEXT", "INT:PLAINTEXT"}},
			want: []broker.Listener{{Name: "EXT", Addr: "0.0.0.0:9093", Advertised: "kafka.example:9093", Protocol: "SASL_PLAINTEXT"},
				{Name: "INT", Addr: "127.0.0.1:9094", Protocol: "PLAINTEXT"}}},
		{name: "SSL and SASL_SSL", f: listenerFlags{listeners: []string{"SSL://127.0.0.1:9093", "SASL_SSL://127.0.0.1:9094"}},
			want: []broker.Listener{{Name: "SSL", Addr: "127.0.0.1:9093", Protocol: "SSL"}, {Name: "SASL_SSL", Addr: "127.0.0.1:9094", Protocol: "SASL_SSL"}}},
		{name: "a listener's own client auth", f: listenerFlags{listeners: []string{"SSL://127.0.0.1:9093", "SASL_SSL://127.0.0.1:9094"}, sslClientAuth: []string{"SSL:required"}},
			want: []broker.Listener{{Name: "SSL", Addr: "127.0.0.1:9093", Protocol: "SSL", SSLClientAuth: "required"}, {Name: "SASL_SSL", Addr: "127.0.0.1:9094", Protocol: "SASL_SSL"}}},
		{name: "client auth of an unknown listener", f: listenerFlags{listeners: []string{"SSL://h:1"}, sslClientAuth: []string{"MTLS:required"}}, bad: true},
		{name: "client auth without a mode", f: listenerFlags{listeners: []string{"SSL://h:1"}, sslClientAuth: []string{"SSL"}}, bad: true},
		{name: "no scheme", f: listenerFlags{listeners: []string{"127.0.0.1:9093"}}, bad: true},
		{name: "twice", f: listenerFlags{listeners: []string{"A://h:1", "A://h:2"}}, bad: true},
		{name: "advertised unknown", f: listenerFlags{listeners: []string{"A://h:1"}, advertised: []string{"B://h:2"}}, bad: true},
		{name: "bad map", f: listenerFlags{listeners: []string{"A://h:1"}, protocols: []string{"A"}}, bad: true},
	} {
		var c broker.Config
		err := tc.f.apply(&c)
		var ue usageError
		switch {
		case tc.bad && !errors.As(err, &ue):
			t.Errorf("%s: %v, want a usage error", tc.name, err)
		case !tc.bad && (err != nil || !reflect.DeepEqual(c.Listeners, tc.want)):
			t.Errorf("%s: %+v, %v; want %+v", tc.name, c.Listeners, err, tc.want)
		}
	}
}
