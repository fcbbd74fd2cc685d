package txns

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ClientCode is the code to send a client for code in a response to the
// given API key and version: PRODUCER_FENCED (KIP-588) is answered as
// INVALID_PRODUCER_EPOCH to the request versions that predate it
// (InitProducerId v3-, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn
// v1-), as Kafka's KafkaApis does. The machine always answers
// PRODUCER_FENCED.
func ClientCode(code, apiKey, version int16) int16 {
	if code == kerr.ProducerFenced.Code && version < fencedSince(apiKey) {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}

// fencedSince is the first version of the API that knows PRODUCER_FENCED.
func fencedSince(apiKey int16) int16 {
	switch kmsg.Key(apiKey) {
	case kmsg.InitProducerID:
		return 4
	case kmsg.AddPartitionsToTxn, kmsg.AddOffsetsToTxn, kmsg.EndTxn:
		return 2
	}
	return 0
}
