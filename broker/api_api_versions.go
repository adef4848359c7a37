package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// ApiVersions: v0-4 (v4 only fixes KAFKA-17011 in the feature fields).
//
// Where it differs from Kafka: no feature flags (KIP-584) are advertised.
// A request above v4 is answered with a v0 response carrying
// UNSUPPORTED_VERSION and our ranges (KIP-511), as Kafka does; ApiVersions
// responses always use response header v0. Any other key at a version
// outside its range closes the connection, as Kafka's SocketServer does
// ("Received request api key ... which is not enabled").

const (
	apiKeyProduce              = 0
	apiKeyFetch                = 1
	apiKeyListOffsets          = 2
	apiKeyMetadata             = 3
	apiKeyApiVersions          = 18
	apiKeyCreateTopics         = 19
	apiKeyInitProducerID       = 22
	apiKeyOffsetForLeaderEpoch = 23
	apiKeyDescribeConfigs      = 32
	apiKeyOffsetCommit         = 8
	apiKeyOffsetFetch          = 9
	apiKeyFindCoordinator      = 10
	apiKeyJoinGroup            = 11
	apiKeyHeartbeat            = 12
	apiKeyLeaveGroup           = 13
	apiKeySyncGroup            = 14
	apiKeyDescribeGroups       = 15
	apiKeyListGroups           = 16
	apiKeyDeleteGroups         = 42
	apiKeyOffsetDelete         = 47
	// Topic administration.
	apiKeyDeleteTopics            = 20
	apiKeyDeleteRecords           = 21
	apiKeyAlterConfigs            = 33
	apiKeyCreatePartitions        = 37
	apiKeyIncrementalAlterConfigs = 44
	apiKeyDescribeCluster         = 60
)

// apiRanges is every key served, with its version range: Kafka 3.9's
// (each key's validVersions in Kafka's message JSON files at the 3.9.0
// tag; none of these has an unstable latest version there).
var apiRanges = []struct{ key, min, max int16 }{
	{apiKeyProduce, 0, 11},
	{apiKeyFetch, 0, 17},
	{apiKeyListOffsets, 0, 9},
	{apiKeyMetadata, 0, 12},
	{apiKeyOffsetCommit, 0, 9},
	{apiKeyOffsetFetch, 0, 9},
	{apiKeyFindCoordinator, 0, 6},
	{apiKeyJoinGroup, 0, 9},
	{apiKeyHeartbeat, 0, 4},
	{apiKeyLeaveGroup, 0, 5},
	{apiKeySyncGroup, 0, 5},
	{apiKeyDescribeGroups, 0, 5},
	{apiKeyListGroups, 0, 5},
	{apiKeyApiVersions, 0, 4},
	{apiKeyCreateTopics, 0, 7},
	{apiKeyInitProducerID, 0, 5},
	{apiKeyOffsetForLeaderEpoch, 0, 4},
	{apiKeyDescribeConfigs, 0, 4},
	{apiKeySASLHandshake, 0, 1},
	{apiKeySASLAuthenticate, 0, 2},
	{apiKeyDeleteGroups, 0, 2},
	{apiKeyOffsetDelete, 0, 0},
	{apiKeyDeleteTopics, 0, 6},
	{apiKeyDeleteRecords, 0, 2},
	{apiKeyAlterConfigs, 0, 2},
	{apiKeyCreatePartitions, 0, 3},
	{apiKeyIncrementalAlterConfigs, 0, 1},
	{apiKeyDescribeCluster, 0, 1},
}

func supported(key, version int16) bool {
	for _, r := range apiRanges {
		if r.key == key {
			return version >= r.min && version <= r.max
		}
	}
	return false
}

func apiVersionKeys() []kmsg.ApiVersionsResponseApiKey {
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(apiRanges))
	for _, r := range apiRanges {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = r.key, r.min, r.max
		out = append(out, k)
	}
	return out
}

func (b *Broker) handleApiVersions(req *kmsg.ApiVersionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = apiVersionKeys()
	return resp
}
