// Package changefeed is the module's broadcast of "something changed":
// a Feed hands out a channel that its next Signal closes. A waiter takes
// the channel, checks the state it waits for, then waits on the channel,
// so that a change between its check and its wait is not missed (the
// pattern of kafkalog's AppendNotify). The broker's Changed, the
// controllers' Changed and the tests' own sources are Feeds; package
// feedtest waits on them in tests instead of polling.
//
// Concurrency: a Feed is safe for concurrent use; Signal never blocks and
// may be called with other locks held. The zero Feed is ready to use.
package changefeed
