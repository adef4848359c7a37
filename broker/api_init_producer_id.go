package broker

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitProducerID: v0-5 (v5 only adds KIP-890's TRANSACTION_ABORTABLE).
//
// Where it differs from Kafka: any broker answers (there is no
// transaction coordinator); a transactional id gets INVALID_REQUEST (no
// transactions); producer ids come from the Controller. As Kafka (KIP-360,
// v3+): a producer that sends its id and epoch gets the same id with the
// epoch bumped, and a new id when the epoch would overflow.

func (b *Broker) handleInitProducerID(req *kmsg.InitProducerIDRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	if req.Version >= 3 && req.ProducerID >= 0 {
		if req.ProducerEpoch >= 0 && req.ProducerEpoch < math.MaxInt16-1 {
			resp.ProducerID, resp.ProducerEpoch = req.ProducerID, req.ProducerEpoch+1
			return resp
		}
	}
	id, err := b.ctrl.NextProducerID()
	if err != nil {
		b.logger.Error("allocate producer id", "err", err)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp
}
