package metadata

import "fmt"

// SegmentState is the life-cycle state of one combined object, with the
// values and transitions of Kafka's RemoteLogSegmentState.
type SegmentState uint8

const (
	// CopySegmentStarted: the upload has begun. kwal publishes metadata only
	// after the PUT succeeded (DESIGN invariant 4), so the PUT itself plays
	// this part and an object's first event is usually CopySegmentFinished.
	CopySegmentStarted SegmentState = 0
	// CopySegmentFinished: the object is durable; its slices may be read.
	CopySegmentFinished SegmentState = 1
	// DeleteSegmentStarted: retention decided to delete the object; nobody
	// starts reading it any more.
	DeleteSegmentStarted SegmentState = 2
	// DeleteSegmentFinished: the object is gone from the store.
	DeleteSegmentFinished SegmentState = 3
)

func (s SegmentState) String() string {
	switch s {
	case CopySegmentStarted:
		return "COPY_SEGMENT_STARTED"
	case CopySegmentFinished:
		return "COPY_SEGMENT_FINISHED"
	case DeleteSegmentStarted:
		return "DELETE_SEGMENT_STARTED"
	case DeleteSegmentFinished:
		return "DELETE_SEGMENT_FINISHED"
	}
	return fmt.Sprintf("SegmentState(%d)", uint8(s))
}

// Valid reports whether s is one of the four states.
func (s SegmentState) Valid() bool { return s <= DeleteSegmentFinished }

// CanTransition reports whether an object in state from may move to state to,
// as RemoteLogSegmentState.isValidTransition does:
//
//	COPY_SEGMENT_STARTED   -> COPY_SEGMENT_FINISHED | DELETE_SEGMENT_STARTED
//	COPY_SEGMENT_FINISHED  -> DELETE_SEGMENT_STARTED
//	DELETE_SEGMENT_STARTED -> DELETE_SEGMENT_FINISHED
//
// Staying in the same state is not a transition; State treats it as a
// duplicate event.
func CanTransition(from, to SegmentState) bool {
	switch from {
	case CopySegmentStarted:
		return to == CopySegmentFinished || to == DeleteSegmentStarted
	case CopySegmentFinished:
		return to == DeleteSegmentStarted
	case DeleteSegmentStarted:
		return to == DeleteSegmentFinished
	}
	return false
}

// PartitionDeleteState is the state of a user partition's deletion, as
// Kafka's RemotePartitionDeleteState.
type PartitionDeleteState uint8

const (
	DeletePartitionMarked   PartitionDeleteState = 0
	DeletePartitionStarted  PartitionDeleteState = 1
	DeletePartitionFinished PartitionDeleteState = 2
)

func (s PartitionDeleteState) String() string {
	switch s {
	case DeletePartitionMarked:
		return "DELETE_PARTITION_MARKED"
	case DeletePartitionStarted:
		return "DELETE_PARTITION_STARTED"
	case DeletePartitionFinished:
		return "DELETE_PARTITION_FINISHED"
	}
	return fmt.Sprintf("PartitionDeleteState(%d)", uint8(s))
}

// Valid reports whether s is one of the three states.
func (s PartitionDeleteState) Valid() bool { return s <= DeletePartitionFinished }

// CanTransitionPartition reports whether a partition deletion may move from
// one state to the next: MARKED -> STARTED -> FINISHED, as
// RemotePartitionDeleteState.isValidTransition (which also accepts a self
// transition; State treats that as a duplicate).
func CanTransitionPartition(from, to PartitionDeleteState) bool {
	switch from {
	case DeletePartitionMarked:
		return to == DeletePartitionStarted
	case DeletePartitionStarted:
		return to == DeletePartitionFinished
	}
	return false
}
