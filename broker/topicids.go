package broker

// topicByID resolves a topic id, as Fetch v13+, Metadata v12 and
// DeleteTopics v6 name topics: the cached name is checked against the
// controller (a recreated topic has a new id), and a miss scans the
// controller's topics once, refreshing the cache. ok is false for an id
// the cluster does not have (deleted, recreated or never created).
func (b *Broker) topicByID(id TopicID) (TopicState, bool) {
	if id.IsZero() {
		return TopicState{}, false
	}
	if name, ok := b.topicIDs.Load(id); ok {
		if ts, ok := b.ctrl.Topic(name.(string)); ok && ts.ID == id {
			return ts, true
		}
		b.topicIDs.Delete(id)
	}
	for _, ts := range b.ctrl.Topics() {
		if ts.ID.IsZero() {
			continue
		}
		b.topicIDs.Store(ts.ID, ts.Name)
		if ts.ID == id {
			return ts, true
		}
	}
	return TopicState{}, false
}
