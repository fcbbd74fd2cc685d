// Command raftq runs raftq nodes and talks to raftq clusters.
//
//	raftq dev                      a 3-node cluster on loopback
//	raftq server --node-id 1 ...   one node
//	raftq topic create|list|describe|delete
//	raftq produce TOPIC            stdin lines, or generated load with --rate
//	raftq consume TOPIC            from the beginning, an offset or the end
//	raftq cluster status           nodes, leaders, terms, lag
//	raftq bench                    produce throughput and latency
//	raftq group list|describe|reset-offsets   consumer groups
//	raftq jepsen run               a checked run of a local cluster under faults
//
// Run "raftq COMMAND --help" for a command's flags.
package main
