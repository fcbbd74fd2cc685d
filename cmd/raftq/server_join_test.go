package main

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestServerFlags_Join: --seeds joins without an initial cluster and
// takes the seeds' cluster id unless --cluster-id is given; with
// --initial-cluster, with no address, with node id 0 or with a voter
// count other than 1, 3 or 5 it is a usage error that says why.
func TestServerFlags_Join(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		seeds   []string
		cluster string
		voters  int
		replace time.Duration
		bad     string
	}{
		{nil, nil, "raftq", 0, 10 * time.Minute, ""},
		{[]string{"--seeds", "10.0.0.1:9093, 10.0.0.2:9093", "--node-id", "4"}, []string{"10.0.0.1:9093", "10.0.0.2:9093"}, "", 0, 10 * time.Minute, ""},
		{[]string{"--seeds", "10.0.0.1:9093", "--cluster-id", "prod"}, []string{"10.0.0.1:9093"}, "prod", 0, 10 * time.Minute, ""},
		{[]string{"--metadata-voters", "3", "--metadata-voter-replace-after", "1h"}, nil, "raftq", 3, time.Hour, ""},
		{[]string{"--seeds", "10.0.0.1:9093", "--initial-cluster", "1=10.0.0.1:9093"}, nil, "", 0, 0, "--seeds and --initial-cluster are exclusive"},
		{[]string{"--seeds", ","}, nil, "", 0, 0, "names no address"},
		{[]string{"--seeds", "10.0.0.1"}, nil, "", 0, 0, `seed "10.0.0.1"`},
		{[]string{"--seeds", "10.0.0.1:9093", "--node-id", "0"}, nil, "", 0, 0, "node id must be non-zero"},
		{[]string{"--metadata-voters", "4"}, nil, "", 0, 0, "metadata voters 4: want 1, 3 or 5"},
		{[]string{"--seeds", "10.0.0.1:9093", "--advertise-peer-addr", "0.0.0.0:9093"}, nil, "", 0, 0, "not a host:port other nodes can dial"},
	} {
		cfg, err := serverConfig(t, tc.args)
		var ue usageError
		switch {
		case tc.bad != "" && (!errors.As(err, &ue) || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("%v: err %v, want a usage error with %q", tc.args, err, tc.bad)
		case tc.bad == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.bad != "":
		case !slices.Equal(cfg.Seeds, tc.seeds) || cfg.ClusterID != tc.cluster || cfg.MetadataVoters != tc.voters || cfg.VoterReplaceAfter != tc.replace:
			t.Errorf("%v: seeds %v cluster %q voters %d replace after %s, want %v %q %d %s", tc.args, cfg.Seeds, cfg.ClusterID,
				cfg.MetadataVoters, cfg.VoterReplaceAfter, tc.seeds, tc.cluster, tc.voters, tc.replace)
		case len(tc.seeds) > 0 && cfg.InitialCluster != nil:
			t.Errorf("%v: initial cluster %v with seeds", tc.args, cfg.InitialCluster)
		}
	}
}
