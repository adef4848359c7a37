package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeCluster: v0-1.
//
// As Kafka: the cluster id, the controller id (the lowest broker id, as
// Metadata reports it) and every registered broker with its rack;
// endpoint type brokers (1) only: a controller endpoint request (2) gets
// UNSUPPORTED_ENDPOINT_TYPE. Authorized operations are not computed
// (-2147483648).

func (b *Broker) handleDescribeCluster(req *kmsg.DescribeClusterRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.ClusterID = b.cfg.ClusterID
	resp.ClusterAuthorizedOperations = -2147483648
	resp.EndpointType = 1
	if req.Version >= 1 && req.EndpointType != 1 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		msg := "only the brokers endpoint type (1) is served"
		resp.ErrorMessage = &msg
		resp.EndpointType = req.EndpointType
		return resp
	}
	resp.ControllerID = -1
	for _, bi := range b.ctrl.Brokers() {
		mb := kmsg.NewDescribeClusterResponseBroker()
		mb.NodeID, mb.Host, mb.Port = bi.ID, bi.Host, bi.Port
		if bi.Rack != "" {
			rack := bi.Rack
			mb.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, mb)
		if resp.ControllerID == -1 || bi.ID < resp.ControllerID {
			resp.ControllerID = bi.ID
		}
	}
	return resp
}
