package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// brokerConfigFlags are the Kafka broker configs of raftq server and
// raftq dev, by Kafka's names: those that default topic configs
// (log.retention.hours, log.cleanup.policy, min.insync.replicas, ...;
// coordinator.BrokerConfigNames). --config-file reads a Kafka-style
// properties file; --override key=value, repeatable as
// kafka-server-start.sh's, wins over it.
type brokerConfigFlags struct {
	file      string
	overrides []string
}

func bindBrokerConfigFlags(fs *pflag.FlagSet) *brokerConfigFlags {
	f := &brokerConfigFlags{}
	fs.StringVar(&f.file, "config-file", "", "a Kafka-style server.properties of broker configs that default topic configs, by Kafka's names (log.retention.hours, log.cleanup.policy, log.segment.bytes, min.insync.replicas, ...); the metadata leader's are the cluster's, so give every node the same")
	fs.StringArrayVar(&f.overrides, "override", nil, "a broker config key=value as in --config-file, over the file's (repeatable)")
	return f
}

// configs returns the broker configs the flags give. A file that cannot
// be read or parsed, a key raftq sets by a flag instead, or a malformed
// --override is a usage error; names and values are checked by
// broker.Config.Validate.
func (f *brokerConfigFlags) configs() (map[string]string, error) {
	out := map[string]string{}
	if f.file != "" {
		b, err := os.ReadFile(f.file)
		if err != nil {
			return nil, usageError{fmt.Errorf("--config-file: %w", err)}
		}
		props, err := parseProperties(string(b))
		if err != nil {
			return nil, usageError{fmt.Errorf("--config-file %s: %w", f.file, err)}
		}
		for _, p := range props {
			if err := checkFileKey(p.key); err != nil {
				return nil, usageError{fmt.Errorf("--config-file %s:%d: %w", f.file, p.line, err)}
			}
			out[p.key] = p.value
		}
	}
	for _, kv := range f.overrides {
		k, v, ok := strings.Cut(kv, "=")
		if k = strings.TrimSpace(k); !ok || k == "" {
			return nil, usageError{fmt.Errorf("--override %q: want key=value", kv)}
		}
		if err := checkFileKey(k); err != nil {
			return nil, usageError{fmt.Errorf("--override %s: %w", k, err)}
		}
		out[k] = v
	}
	return out, nil
}

// flagOfBrokerConfig names the raftq flag for a Kafka broker config
// that raftq takes as a flag, not from --config-file, so that a Kafka
// server.properties brought along fails with a way forward.
var flagOfBrokerConfig = map[string]string{
	"node.id": "--node-id", "broker.id": "--node-id",
	"log.dirs": "--data-dir", "log.dir": "--data-dir",
	"listeners": "--kafka-addr", "advertised.listeners": "--advertise-kafka-addr",
	"controller.quorum.voters": "--initial-cluster", "controller.quorum.bootstrap.servers": "--initial-cluster",
	"num.partitions": "--default-partitions", "default.replication.factor": "--default-replication-factor",
	"auto.create.topics.enable": "--auto-create-topics",
	"replica.lag.time.max.ms":   "--replica-lag-time-max", "replica.fetch.wait.max.ms": "--replica-fetch-wait-max",
	"log.retention.check.interval.ms": "--retention-check-interval",
	"log.cleaner.backoff.ms":          "--log-cleaner-backoff", "log.cleaner.io.max.bytes.per.second": "--log-cleaner-io-bytes-per-sec",
	"auto.leader.rebalance.enable": "--leader-balance-interval", "leader.imbalance.check.interval.seconds": "--leader-balance-interval",
	"transaction.state.log.num.partitions": "--transaction-partitions", "transaction.max.timeout.ms": "--transaction-max-timeout", "transactional.id.expiration.ms": "--transactional-id-expiration",
	"offsets.topic.num.partitions": "--offsets-partitions", "offsets.retention.minutes": "--offsets-retention",
	"group.min.session.timeout.ms": "--group-min-session-timeout", "group.max.session.timeout.ms": "--group-max-session-timeout",
	"group.initial.rebalance.delay.ms": "--group-initial-rebalance-delay",
	"eligible.leader.replicas.version": "--eligible-leader-replicas",
}

// checkFileKey refuses a broker config that raftq sets by a flag,
// naming the flag. Other unknown names are left to Validate, which
// lists the names raftq takes.
func checkFileKey(key string) error {
	if flag, ok := flagOfBrokerConfig[key]; ok {
		return fmt.Errorf("%s is set by raftq's %s flag, not as a broker config", key, flag)
	}
	return nil
}

// property is one key=value of a properties file, with the line it
// starts on.
type property struct {
	line       int
	key, value string
}

// parseProperties reads the Java properties format Kafka's
// server.properties uses: '#' and '!' comment lines, key and value
// separated by '=', ':' or white space, a trailing backslash continuing
// the line, and backslash escapes (\t, \n, \uXXXX, \=, ...).
func parseProperties(text string) ([]property, error) {
	var out []property
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		start := i + 1
		logical := strings.TrimLeft(lines[i], " \t\f")
		if logical == "" || logical[0] == '#' || logical[0] == '!' {
			continue
		}
		for continues(logical) && i+1 < len(lines) {
			i++
			logical = logical[:len(logical)-1] + strings.TrimLeft(lines[i], " \t\f")
		}
		key, value, err := splitProperty(logical)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", start, err)
		}
		out = append(out, property{line: start, key: key, value: value})
	}
	return out, nil
}

// continues reports whether a line ends in an odd number of backslashes.
func continues(line string) bool {
	n := len(line) - len(strings.TrimRight(line, `\`))
	return n%2 == 1
}

// splitProperty splits one logical line at its first unescaped '=', ':'
// or white space and unescapes both sides.
func splitProperty(line string) (key, value string, err error) {
	end := len(line)
	for i := 0; i < len(line); i++ {
		if line[i] == '\\' {
			i++
			continue
		}
		if strings.IndexByte("=: \t\f", line[i]) >= 0 {
			end = i
			break
		}
	}
	rest := strings.TrimLeft(line[end:], " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	if key, err = unescape(line[:end]); err != nil {
		return "", "", err
	}
	value, err = unescape(rest)
	return key, value, err
}

func unescape(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			r, err := strconv.ParseUint(s[i+1:min(i+5, len(s))], 16, 32)
			if err != nil || i+5 > len(s) {
				return "", fmt.Errorf("bad escape \\u%s", s[i+1:min(i+5, len(s))])
			}
			b.WriteRune(rune(r))
			i += 4
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}
