package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Every request kmsg knows, at every version, yields an error response
// that encodes and decodes at that version.
func TestErrorResponse_AllKeysAllVersions(t *testing.T) {
	code := kerr.UnsupportedVersion.Code
	keys := 0
	for key := int16(0); key < 1000; key++ {
		if kmsg.RequestForKey(key) == nil {
			continue
		}
		keys++
		for v := int16(0); v <= kmsg.RequestForKey(key).MaxVersion(); v++ {
			req := kmsg.RequestForKey(key)
			req.SetVersion(v)
			resp, _ := ErrorResponse(req, code)
			if resp.Key() != key || resp.GetVersion() != v {
				t.Fatalf("%s v%d: response is %s v%d", kmsg.NameForKey(key), v, kmsg.NameForKey(resp.Key()), resp.GetVersion())
			}
			back := req.ResponseKind()
			if err := back.ReadFrom(resp.AppendTo(nil)); err != nil {
				t.Fatalf("%s v%d: error response does not decode: %v", kmsg.NameForKey(key), v, err)
			}
		}
	}
	if keys < 50 {
		t.Fatalf("only %d keys known to kmsg", keys)
	}
}

func TestErrorResponse_PerEntryErrors(t *testing.T) {
	code := kerr.UnsupportedVersion.Code
	t.Run("produce partitions", func(t *testing.T) {
		resp := mustError(t, produceReq(9, 1, "a", "b")).(*kmsg.ProduceResponse)
		if len(resp.Topics) != 2 || resp.Topics[1].Topic != "b" || len(resp.Topics[1].Partitions) != 2 {
			t.Fatalf("topics %+v", resp.Topics)
		}
		if p := resp.Topics[1].Partitions[1]; p.Partition != 1 || p.ErrorCode != code || p.LogStartOffset != -1 {
			t.Fatalf("partition %+v: want partition 1, the code, kmsg defaults", p)
		}
	})
	t.Run("fetch by topic id", func(t *testing.T) {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(13)
		ft := kmsg.NewFetchRequestTopic()
		ft.TopicID = [16]byte{1, 2, 3}
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition = 4
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		resp := mustError(t, req).(*kmsg.FetchResponse)
		if resp.ErrorCode != code || resp.Topics[0].TopicID != ft.TopicID || resp.Topics[0].Partitions[0].Partition != 4 ||
			resp.Topics[0].Partitions[0].ErrorCode != code {
			t.Fatalf("fetch response %+v", resp)
		}
	})
	t.Run("delete topics by name list", func(t *testing.T) {
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.SetVersion(3)
		req.TopicNames = []string{"x", "y"}
		resp := mustError(t, req).(*kmsg.DeleteTopicsResponse)
		if len(resp.Topics) != 2 || *resp.Topics[1].Topic != "y" || resp.Topics[1].ErrorCode != code {
			t.Fatalf("topics %+v", resp.Topics)
		}
	})
	t.Run("find coordinator keys", func(t *testing.T) {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.SetVersion(4)
		req.CoordinatorKeys = []string{"g1"}
		resp := mustError(t, req).(*kmsg.FindCoordinatorResponse)
		if len(resp.Coordinators) != 1 || resp.Coordinators[0].Key != "g1" || resp.Coordinators[0].ErrorCode != code {
			t.Fatalf("coordinators %+v", resp.Coordinators)
		}
	})
	t.Run("describe configs resources", func(t *testing.T) {
		req := kmsg.NewPtrDescribeConfigsRequest()
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
		req.Resources = append(req.Resources, r)
		resp := mustError(t, req).(*kmsg.DescribeConfigsResponse)
		if got := resp.Resources[0]; got.ResourceName != "t" || got.ResourceType != kmsg.ConfigResourceTypeTopic || got.ErrorCode != code {
			t.Fatalf("resource %+v", got)
		}
	})
	t.Run("metadata v0 for all topics carries no error", func(t *testing.T) {
		if _, ok := ErrorResponse(metadataReq(0), code); ok {
			t.Fatal("ErrorResponse claims a Metadata v0 response for no topics carries an error")
		}
	})
}

func mustError(t *testing.T, req kmsg.Request) kmsg.Response {
	t.Helper()
	resp, ok := ErrorResponse(req, kerr.UnsupportedVersion.Code)
	if !ok {
		t.Fatalf("no error response for %s v%d", kmsg.NameForKey(req.Key()), req.GetVersion())
	}
	back := req.ResponseKind()
	if err := back.ReadFrom(resp.AppendTo(nil)); err != nil {
		t.Fatalf("error response does not decode: %v", err)
	}
	return back // what a client sees
}
