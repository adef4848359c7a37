package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteGroups: v0-2.
//
// As Kafka: only an empty group can be deleted (NON_EMPTY_GROUP), an
// unknown one gets GROUP_ID_NOT_FOUND; its group and offset records are
// replaced by tombstones in __consumer_offsets before the answer.

func (b *Broker) handleDeleteGroups(cs *connState, req *kmsg.DeleteGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, id := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = id
		err := kerr.InvalidGroupID
		if id != "" {
			ctx, cancel := b.groupCtx(cs, b.cfg.Groups.OffsetCommitTimeout+groupWaitMargin)
			err = b.groups.coord.Delete(ctx, id)
			cancel()
		}
		if err != nil {
			rg.ErrorCode = err.Code
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}
