package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/raftq/raftq/broker"
)

// listenerFlags are Kafka's listeners, advertised.listeners and
// listener.security.protocol.map for the listeners beside --kafka-addr
// (which is PLAINTEXT and the one nodes use among themselves).
type listenerFlags struct {
	listeners, advertised, protocols []string
	sslClientAuth                    []string // NAME:MODE, Kafka's listener.name.<name>.ssl.client.auth
}

func bindListenerFlags(fs *pflag.FlagSet, c *broker.Config) *listenerFlags {
	f := &listenerFlags{}
	fs.StringSliceVar(&f.listeners, "listeners", nil, "more Kafka listeners beside --kafka-addr, as NAME://host:port (comma separated), e.g. SASL_PLAINTEXT://127.0.0.1:9093,SSL://127.0.0.1:9094")
	fs.StringSliceVar(&f.advertised, "advertised-listeners", nil, "addresses given to clients of each named listener, as NAME://host:port (default: its listen address)")
	fs.StringSliceVar(&f.protocols, "listener-security-protocol-map", nil, "security protocol of each listener name, as NAME:PROTOCOL (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL; default: the name itself)")
	fs.StringSliceVar(&f.sslClientAuth, "listener-ssl-client-auth", nil, "--ssl-client-auth for one SSL or SASL_SSL listener, as NAME:MODE (Kafka's listener.name.<name>.ssl.client.auth), e.g. SSL:required,SASL_SSL:none")
	fs.StringSliceVar(&c.SASLMechanisms, "sasl-enabled-mechanisms", nil, "mechanisms SASL listeners offer: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (default all three; users: raftq user create)")
	fs.DurationVar(&c.SASLReauth, "connections-max-reauth", 0, "how long a SASL session lasts before the client must authenticate again (Kafka's connections.max.reauth.ms, KIP-368; 0: as long as the connection)")
	return f
}

// apply fills c.Listeners.
func (f *listenerFlags) apply(c *broker.Config) error {
	advertised, err := parseNamedAddrs("--advertised-listeners", f.advertised)
	if err != nil {
		return err
	}
	protocols := map[string]string{}
	for _, p := range f.protocols {
		name, proto, ok := strings.Cut(p, ":")
		if !ok || name == "" || proto == "" {
			return usageError{fmt.Errorf("--listener-security-protocol-map %q: want NAME:PROTOCOL", p)}
		}
		protocols[name] = proto
	}
	addrs, err := parseNamedAddrs("--listeners", f.listeners)
	if err != nil {
		return err
	}
	for _, name := range orderedNames(f.listeners) {
		proto, ok := protocols[name]
		if !ok {
			proto = name
		}
		c.Listeners = append(c.Listeners, broker.Listener{Name: name, Addr: addrs[name], Advertised: advertised[name], Protocol: proto})
	}
	for name := range advertised {
		if _, ok := addrs[name]; !ok {
			return usageError{fmt.Errorf("--advertised-listeners names %s, which --listeners does not", name)}
		}
	}
	return f.applySSLClientAuth(c)
}

// applySSLClientAuth sets the listeners' own client auth; the broker's
// validation checks the modes.
func (f *listenerFlags) applySSLClientAuth(c *broker.Config) error {
	for _, e := range f.sslClientAuth {
		name, mode, ok := strings.Cut(e, ":")
		i := slices.IndexFunc(c.Listeners, func(l broker.Listener) bool { return l.Name == name })
		switch {
		case !ok || name == "" || mode == "":
			return usageError{fmt.Errorf("--listener-ssl-client-auth %q: want NAME:MODE", e)}
		case i < 0:
			return usageError{fmt.Errorf("--listener-ssl-client-auth names %s, which --listeners does not", name)}
		}
		c.Listeners[i].SSLClientAuth = mode
	}
	return nil
}

// parseNamedAddrs parses NAME://host:port entries.
func parseNamedAddrs(flag string, entries []string) (map[string]string, error) {
	out := map[string]string{}
	for _, e := range entries {
		name, addr, ok := strings.Cut(e, "://")
		if !ok || name == "" || addr == "" {
			return nil, usageError{fmt.Errorf("%s %q: want NAME://host:port", flag, e)}
		}
		if _, dup := out[name]; dup {
			return nil, usageError{fmt.Errorf("%s names %s twice", flag, name)}
		}
		out[name] = addr
	}
	return out, nil
}

func orderedNames(entries []string) []string {
	var out []string
	for _, e := range entries {
		name, _, _ := strings.Cut(e, "://")
		out = append(out, name)
	}
	return out
}
