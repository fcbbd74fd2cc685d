package jepsen

import "fmt"

// Type says where an operation is in its life: invoked, or completed as ok
// (it happened), fail (it definitely did not happen) or info (it may or may
// not have happened: a timeout, a lost connection, a crash).
type Type string

// The four operation types, as Jepsen names them.
const (
	Invoke Type = "invoke"
	OK     Type = "ok"
	Fail   Type = "fail"
	Info   Type = "info"
)

func (t Type) valid() bool {
	switch t {
	case Invoke, OK, Fail, Info:
		return true
	}
	return false
}

// F names what an operation does.
type F string

// The operations the workload and the nemesis runner record.
const (
	// FSend produces one record to one partition.
	FSend F = "send"
	// FPoll polls a consumer once.
	FPoll F = "poll"
	// FAssign replaces a consumer's partitions and seeks each to an offset.
	FAssign F = "assign"
	// FSubscribe replaces a consumer's assignment with a group subscription.
	FSubscribe F = "subscribe"
	// FCrash tears a client down on purpose; the process ends with it.
	FCrash F = "crash"
	// FFinalRead reads one partition from offset 0 to its high watermark
	// after the faults are healed.
	FFinalRead F = "final-read"
	// FStart and FStop begin and end a named fault.
	FStart F = "start"
	FStop  F = "stop"
	// FTxn runs one Kafka transaction: optional polls of the process's
	// read_committed consumer, then sends, then a commit or an abort.
	FTxn F = "txn"
)

func (f F) valid() bool {
	switch f {
	case FSend, FPoll, FAssign, FSubscribe, FCrash, FFinalRead, FStart, FStop, FTxn:
		return true
	}
	return false
}

func (f F) nemesis() bool { return f == FStart || f == FStop }

// NemesisProcess is the process of every nemesis operation.
const NemesisProcess = -1

// NoOffset marks an offset that is not known.
const NoOffset int64 = -1

// TP names one topic-partition.
type TP struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

func (tp TP) String() string { return fmt.Sprintf("%s/%d", tp.Topic, tp.Partition) }

// Op is one entry of a history: an invocation or a completion.
//
// A process runs one operation at a time, so a completion belongs to the
// latest invocation of the same process. A process that ends with info never
// invokes again; its worker continues under a new process id.
type Op struct {
	// Index is the position of the op in its history, from 0.
	Index int64 `json:"index"`
	// Time is monotonic nanoseconds since the run started.
	Time    int64 `json:"time"`
	Type    Type  `json:"type"`
	Process int   `json:"process"`
	F       F     `json:"f"`

	// Send is the record of a send; on ok it carries the assigned offset.
	Send *SendValue `json:"send,omitempty"`
	// Txn is a transaction's sends and how it ended. Its polls' records
	// are in Reads, as a poll's are.
	Txn *TxnValue `json:"txn,omitempty"`
	// Reads holds what a poll or final read returned, per partition. A
	// final read's invocation names its one partition here with no records.
	Reads []PartitionRead `json:"reads,omitempty"`
	// Seeks is an assign's new partitions and the offset each starts at.
	Seeks []Seek `json:"seeks,omitempty"`
	// Topics and Group are a subscribe's topics and consumer group.
	Topics []string `json:"topics,omitempty"`
	Group  string   `json:"group,omitempty"`
	// Rebalanced lists the partitions a group rebalance assigned or revoked
	// while this poll ran; their consumer position is unknown afterwards.
	Rebalanced []TP `json:"rebalanced,omitempty"`
	// Nemesis names the fault a start or stop acts on. A start's or
	// stop's completion carries the nodes it acted on (a membership
	// fault's only a node it killed) and what it did, for people.
	Nemesis string `json:"nemesis,omitempty"`
	Nodes   []int  `json:"nodes,omitempty"`
	Detail  string `json:"detail,omitempty"`
	// Error is the client error behind a fail or info, or per-op notes.
	Error string `json:"error,omitempty"`
}

// SendValue is what a send wrote and, on ok, where.
type SendValue struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Key       string `json:"key"`
	Value     string `json:"value"`
	// Offset is the acknowledged offset, or NoOffset.
	Offset int64 `json:"offset"`
}

// TP returns the send's topic-partition.
func (s *SendValue) TP() TP { return TP{s.Topic, s.Partition} }

// TxnValue is what one transaction sent and how it ended.
//
// A txn op completes ok when its commit was acknowledged (every send is
// visible to read_committed readers), fail when it definitely did not
// commit (its abort was acknowledged, or it ended before any send reached a
// broker), and info otherwise. A txn's polls run before its sends, so its
// Reads never hold its own records; they are observations whatever the
// txn's outcome.
type TxnValue struct {
	// ID is the transactional id of the producer that ran the txn.
	ID string `json:"id"`
	// Sends are the txn's records in the order sent; in a completion each
	// carries the offset its produce acknowledged, or NoOffset.
	Sends []SendValue `json:"sends"`
	// Abort says the txn was meant to end with an abort, not a commit.
	Abort bool `json:"abort,omitempty"`
	// EndStart is when the commit or abort (EndTxn) was called, on the
	// history's clock, or 0 when it never was. No read_committed read that
	// completed before it may return the txn's records.
	EndStart int64 `json:"end_start,omitempty"`
}

// PartitionRead is what one read returned from one partition.
type PartitionRead struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Records   []Record `json:"records"`
	// HighWatermark is the partition's high watermark as the read saw it,
	// or NoOffset.
	HighWatermark int64  `json:"hw"`
	Error         string `json:"error,omitempty"`
}

// TP returns the read's topic-partition.
func (r *PartitionRead) TP() TP { return TP{r.Topic, r.Partition} }

// Record is one record a read returned. It is encoded as [offset, value].
type Record struct {
	Offset int64
	Value  string
}

// Seek starts a partition's consumption at Offset.
type Seek struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// TP returns the seek's topic-partition.
func (s Seek) TP() TP { return TP{s.Topic, s.Partition} }

// History is a sequence of operations in the order they were recorded.
type History []Op

// Completion returns a copy of an invocation with type t, ready for the
// Recorder to stamp. Payloads are deep-copied so the caller may fill them.
func (o Op) Completion(t Type) Op {
	c := o
	c.Index, c.Time, c.Type = 0, 0, t
	if o.Send != nil {
		s := *o.Send
		c.Send = &s
	}
	if o.Txn != nil {
		t := *o.Txn
		t.Sends = append([]SendValue(nil), o.Txn.Sends...)
		c.Txn = &t
	}
	c.Reads = append([]PartitionRead(nil), o.Reads...)
	c.Seeks = append([]Seek(nil), o.Seeks...)
	c.Topics = append([]string(nil), o.Topics...)
	c.Rebalanced = append([]TP(nil), o.Rebalanced...)
	c.Nodes = append([]int(nil), o.Nodes...)
	return c
}
