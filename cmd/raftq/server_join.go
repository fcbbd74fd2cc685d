package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/raftq/raftq/broker"
)

// joinFlags are raft server's flags for growing a cluster: --seeds (join
// a running one) and group 0's voters.
type joinFlags struct {
	seeds string
	// clusterIDSet reports whether --cluster-id was given (nil: it was):
	// a joining node without it takes its seeds' cluster id.
	clusterIDSet func() bool
}

const seedsUsage = "join a running cluster through any of its nodes: their peer addresses (--peer-addr, as --initial-cluster lists them), comma separated; " +
	"the cluster id is learnt from them unless --cluster-id is given; exclusive with --initial-cluster; a node whose data dir holds a member's data restarts without them"

func bindJoinFlags(fs *pflag.FlagSet, f *serverFlags) {
	c := &f.cfg
	fs.StringVar(&f.join.seeds, "seeds", "", seedsUsage)
	fs.DurationVar(&c.JoinTimeout, "join-timeout", c.JoinTimeout, "how long a joining node tries its seeds before it gives up")
	fs.StringVar(&c.AdvertisedPeerAddr, "advertise-peer-addr", "", "peer address other nodes dial (default: --peer-addr as bound; a joining node needs one that is not a wildcard)")
	fs.IntVar(&c.MetadataVoters, "metadata-voters", 0, "voters of the metadata group: 1, 3 or 5 (default 5, or as many nodes as there are, rounded down to odd); the other nodes follow it as learners")
	fs.DurationVar(&c.VoterReplaceAfter, "metadata-voter-replace-after", c.VoterReplaceAfter,
		"how long a metadata voter must be dead before the metadata leader replaces it with a live, caught-up learner (0: never)")
	f.join.clusterIDSet = func() bool { return fs.Changed("cluster-id") }
}

// joinConfig applies --seeds to c: no initial cluster, and the cluster id
// from the seeds unless --cluster-id was given.
func (f *serverFlags) joinConfig(c *broker.Config) error {
	if f.join.seeds == "" {
		return nil
	}
	if f.cluster != "" {
		return usageError{errors.New("--seeds and --initial-cluster are exclusive: --initial-cluster starts a cluster, --seeds joins a running one")}
	}
	c.Seeds = nil
	for _, s := range strings.Split(f.join.seeds, ",") {
		if s = strings.TrimSpace(s); s != "" {
			c.Seeds = append(c.Seeds, s)
		}
	}
	if len(c.Seeds) == 0 {
		return usageError{fmt.Errorf("--seeds %q names no address", f.join.seeds)}
	}
	c.InitialCluster = nil
	if f.join.clusterIDSet != nil && !f.join.clusterIDSet() {
		c.ClusterID = ""
	}
	return nil
}
