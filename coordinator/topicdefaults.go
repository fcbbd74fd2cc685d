package coordinator

import (
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// setTopicDefaults replaces the cluster's topic defaults. Each must be a
// topic config with a broker synonym, known at c's config version, with
// a value that config takes. Every topic takes the new defaults at once,
// as Kafka's topics take a changed broker default, and ISR topics elect
// again, as after an AlterConfigs: a default min.insync.replicas moves
// the ELR threshold, and unclean election may end a partition's
// leaderlessness.
func (s *State) setTopicDefaults(c *SetTopicDefaults) Result {
	for _, k := range slices.Sorted(maps.Keys(c.Defaults)) {
		if err := checkTopicDefault(k, c.Defaults[k], c.ConfigVersion); err != nil {
			return Result{Err: cmdErr(kerr.InvalidConfig, "topic default %s: %s", k, err)}
		}
	}
	s.TopicDefaults = nil
	if len(c.Defaults) > 0 {
		s.TopicDefaults = maps.Clone(c.Defaults)
	}
	for name, t := range s.Topics {
		n := t.copy()
		n.defaults = s.TopicDefaults
		if n.IsISR() {
			s.reelectISR(n)
		}
		s.Topics[name] = n
	}
	return Result{}
}

func checkTopicDefault(key string, d TopicDefault, version int) error {
	def, ok := topicConfigDefs[key]
	switch {
	case !ok || def.Since > version:
		return fmt.Errorf("unknown topic config")
	case len(brokerSynonyms[key]) == 0:
		return fmt.Errorf("no broker config defaults it")
	case len(d.Set) == 0:
		return fmt.Errorf("no broker config set it")
	}
	return def.check(d.Value, version)
}

// linkDefaults gives every topic of s, freshly decoded from a snapshot,
// the state's topic defaults.
func (s *State) linkDefaults() {
	for _, t := range s.Topics {
		if t != nil {
			t.defaults = s.TopicDefaults
		}
	}
}
