// Package broker is kwal's Kafka-compatible broker harness: the wire
// protocol (decoded and encoded with franz-go's kmsg, one file per API
// key, api_*.go), partitions and their logs, classic replication (a
// replica fetcher per leader, high watermark as the smallest log end over
// the ISR, ISR shrink and expansion, KIP-101 truncation), acks 0/1/all,
// idempotent producers (the sequence rules, producers.go; the producer
// table lives in kafkalog and is rebuilt when a log opens), local
// retention (retention.go: every log.retention.check.interval.ms, bounded
// by the high watermark and on a remotewal leader by the remote-WAL
// upload), long-poll fetches, fetch from follower by rack (KIP-392), the
// controller seam, the server.properties loader and the wire side of the
// group coordinator (package group): FindCoordinator, JoinGroup,
// SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups,
// DescribeGroups, DeleteGroups and OffsetDelete (groups.go and their
// api_*.go files).
//
// It does not own storage formats (kafkalog), the delayed-operation
// machinery (purgatory), nor the remote WAL: a partition whose topic sets
// remote.wal.storage.enable=true is in RemoteWAL mode, where the leader's
// answers to follower fetches carry offsets, the high watermark and the
// leader epoch but no records, and a Replicator (replicator.go; rwnode
// assembles the one kwal runs) moves the bytes. The broker hands a
// Replicator a partition's log when it leads and a FollowerReplica handle
// (replica_handle.go: append as follower, truncate, log end, leader
// epochs, leader address and rack, notify) when it follows; the
// Replicator holds no pointer to the broker. The in-process cluster of the
// demo and benches is package localcluster.
//
// # Wire
//
//	request  frame: size int32 | key int16 | version int16 | correlation int32 |
//	                client id (nullable string) | [tags, flexible versions] | body
//	response frame: size int32 | correlation int32 | [tags, flexible versions
//	                except ApiVersions, which always uses header v0] | body
//
// Frames larger than socket.request.max.bytes or smaller than a header
// close the connection with a log line. An unknown key, or a key at a
// version outside Kafka 3.9's range (api_api_versions.go), closes it, as
// Kafka's SocketServer does; ApiVersions above v4 gets a v0 response with
// UNSUPPORTED_VERSION and our ranges (KIP-511). A request that does not decode closes the connection. Nothing
// panics: a panic in a handler is logged and closes the connection.
//
// A produced batch is validated once, by the broker's
// kafkalog.BatchValidator (compressed records decompressed and walked):
// CORRUPT_MESSAGE for bytes that do not decode and for every corrupt
// compressed batch (its lastOffsetDelta disagreeing with its records
// too), INVALID_RECORD for Kafka's other client-batch rules, each with a
// warning naming the client.
// A partition number the topic does not have is UNKNOWN_TOPIC_OR_PARTITION;
// one it has but this broker does not hold is NOT_LEADER_OR_FOLLOWER.
//
// # Connections
//
// Every listener accepts through a quotaListener over one connQuota
// (connlimit.go; TLS sits on top of the counted connection): at
// max.connections, counted over all listeners, Accept waits for a slot
// (new connections wait in the kernel backlog, as Kafka's acceptor does),
// except on the inter-broker listener of a broker with several (Kafka's
// protected listener): its connection is let in and the least recently
// used connection of another listener is closed with a warning
// (Broker.makeRoom), so replication and the controller still connect when
// clients have taken every slot; a connection over
// max.connections.per.ip (or its max.connections.per.ip.overrides entry)
// is closed at once with a warning. A reaper on the broker's clock closes
// connections idle longer than connections.max.idle.ms (none of their
// responses pending) and those whose request started (first byte read)
// but did not arrive whole within kwal.socket.request.read.timeout.ms
// (slowloris). Bytes a connection holds (request frames being served or
// waiting for a pipelined response, queued responses) are bounded by
// kwal.connection.max.buffered.bytes: past it the reader stops reading.
// A failing accept (EMFILE and the like) is logged once, retried with a
// backoff of 5 ms doubling to 1 s on the broker's clock, and logged again
// with the count of failures once accepting works; open connections are
// served meanwhile.
//
// # Configuration
//
// Every integer server key has an allowed range (configranges.go,
// printed by kwal broker --keys), checked twice: each explicit value as
// server.properties is read (so 0 is not mistaken for "unset"), and the
// filled-in Config in CheckSettings, with the cross-key rules
// (min.insync.replicas <= default.replication.factor <= brokers in
// cluster.brokers; replica.fetch.wait.max.ms <= replica.lag.time.max.ms).
// New proves log.dirs, and every partition directory in it, writable by
// writing a file (an unusable log dir refuses the start, as Kafka's JBOD
// handling does when no dir is left); a log dir that fails at run time is
// offline until a restart (logdir.go: KAFKA_STORAGE_ERROR, offline
// replicas in Metadata, kwal_log_dir_offline), and the broker reports it
// to the controller at once, which moves its leaderships (see "Liveness
// and election"). rwnode.OpenRemoteWALParts lists
// the store within remote.wal.storage.check.timeout.ms; kwal broker bounds
// each attempt at the metadata bootstrap by
// remote.wal.metadata.bootstrap.timeout.ms, and retries an unreachable
// metadata Kafka for up to remote.wal.metadata.start.wait.ms (as a Kafka
// broker waits for its controller quorum; cmd/kwal startwait.go). Each
// refusal wraps ErrConfig and names the key, the value, the range and
// what to do. Topic configs get the same treatment at CreateTopics
// (INVALID_CONFIG naming the key).
//
// # Listeners and security
//
// A broker binds every entry of Config.Listeners (listeners,
// listener.security.protocol.map, advertised.listeners) and registers all
// their advertised endpoints with the controller; BrokerInfo.Host/Port are
// the inter-broker listener's. Metadata answers with each broker's
// endpoint on the listener the request came in on (Kafka's rule), so one
// cluster can serve containers on INTERNAL and the host on EXTERNAL.
//
//	accept (one loop per listener) ─► serveConn goroutine:
//	    SSL, SASL_SSL: TLS handshake (10 s bound) ─┐
//	    PLAINTEXT, SASL_PLAINTEXT ─────────────────┴─► SASL listeners: only
//	    ApiVersions, SaslHandshake, SaslAuthenticate until authenticated
//	    (PLAIN, SCRAM-SHA-256/512; requests ≤ 512 KiB) ─► dispatch
//
// Every listener is accepted through one multiListener under the one set
// of connection limits, under TLS: the handshake runs in the connection's
// goroutine, never in the accept loop. Replica
// fetchers and remote-WAL leader requests dial the inter-broker listener
// (dialBroker) with InterBrokerTLS and InterBrokerSASL. SCRAM is RFC 5802
// over credentials stored salted (UserFile, kwal users add); PLAIN is
// checked against the same stored credential. An unknown user runs the
// SCRAM exchange against a stand-in credential, so it fails exactly as a
// wrong password does. See sasl.go for what differs from Kafka.
//
// # Replication (classic)
//
//	producer ──Produce──► leader: appendAsLeader ─┐
//	                                              ├─► fetch purgatory wakes follower long polls
//	follower fetcher ──Fetch v12 (replica id)──► leader: fetch offset = follower LEO,
//	     ▲                                        HW = min LEO over ISR ─► produce purgatory
//	     └──── records + HW ◄─────────────────────┘   (acks=all answers when HW > last offset)
//	follower: AppendAsFollower, HW = min(leader HW, LEO), wakes its consumers
//
// The decisions are not made here but in package replica's pure state
// machines; this package only feeds them events and carries out their
// actions. partition.go drives a replica.Leader while this broker leads:
// followerFetched (FollowerFetch: follower progress, ISR expansion),
// maybeAdvanceHW (where the HW advances; publishHW applies AdvanceHW to the
// log and reports HWApplied), ackDone (AckDone: the only acks=all
// completion rule, which api_produce.go's produce operation asks),
// shrinkProposal (Tick, run by shrinkISRs from the fixed-rate ISR loop
// isrLoop in broker.go: where the ISR shrinks) and applyState (a new Leader per leader epoch,
// ISRChanged for the controller's answers). fetcher.go drives one
// replica.Follower per followed partition and epoch: it sends the
// OffsetForLeaderEpoch queries and fetches the machines ask for and
// carries out Truncate (where truncation is decided: replica.Truncation,
// KIP-101/KIP-279), Append, SetHW, TruncateFully and StartRemote through
// the partition's followerLog handle, never its locks.
//
// A fetcher wakes on what resolves its waits, not only on timers: a
// partition added (a new leader or epoch) cuts the long poll in flight,
// which does not name it (add); a change applied by the controller ends
// every back-off (fetcherManager.watchCluster, replica.Follower.
// ClusterChanged; a round in flight across a change ends the back-offs its
// answers began), since NOT_LEADER, FENCED_LEADER_EPOCH or a dial error
// usually means the leader had not applied, or registered, the new state
// yet; the back-off timer stays the fallback. The leader answers a
// follower's parked fetch at once when the follower lacks the current
// high watermark or log start (replica.Leader.News), so a
// DeleteRecords waiting on the followers' log starts does not wait for a
// long poll to end. What an answer told counts only once it was written
// to the follower's connection (Leader.Told, connState.written); the
// fetcher resets the connection of a poll it cuts, so the answer to it
// fails to be written and its news stay news. Socket deadlines are taken from the wall clock, except
// a replica long poll's: its max wait plus 30 s (Kafka's
// replica.socket.timeout.ms) on Config.Clock, the clock the leader's poll
// waits on, so a test's frozen manual clock never cuts it.
//
// A remotewal follower's fetch carries no records and long-polls like a
// classic one; the leader answers it when it appends or its HW moves. Its
// log grows from object storage meanwhile, so each append's log end goes
// to the leader at once in a log end report (replica.SendLogEndReport): a
// Fetch that does not wait, sent by the fetcher's reportLoop on a
// connection of its own. The leader advances the HW on it and answers at
// once (and wakes the fetch in flight), so the follower serves a record
// one round trip after appending it:
//
//	follower: append from object storage ─► report (Fetch, max wait 0) ─► leader:
//	    follower LEO, HW advances ─► answer HW ─► follower: SetHW, wakes its consumers
//
// Two connections do not keep the order the follower read its log ends
// in: a report may be handled before the long poll sent ahead of it, whose
// older offset would then lower the leader's view of the follower and
// stall the HW until the next round. Every replica fetch and report
// carries a stamp (TagFetchStamp: the broker's random incarnation and a
// sequence number taken when its log ends were read, under the fetcher's
// lock), and the leader takes an offset only from a newer stamp
// (replica.Leader.FollowerFetchStamped). Not a max: a truncated follower's
// next fetch has a newer stamp and a lower offset, and lowers the view.
// The stamp also carries the broker's registration epoch (Kafka's broker
// epoch, KIP-903), which orders two processes of one broker: once a
// restarted follower has been heard from, a fetch of its dead process
// still on the wire (a retransmission after a partition heals) is stale,
// and cannot raise the view over the log the new process recovered,
// whose unflushed tail may be gone. A process not yet registered (epoch
// 0: its first fetches at start, or while the controller is unreachable)
// is not ordered against another, and both count.
//
// # Group coordinator
//
// __consumer_offsets is created by the first FindCoordinator for a group
// (offsets.topic.num.partitions, offsets.topic.replication.factor capped
// to the brokers, cleanup.policy=compact). applyTopic tells the
// coordinator when this broker becomes or stops being leader of one of its
// partitions (offsetsRoleChanged): the coordinator loads that partition's
// groups and offsets, or drops them, so it moves with leadership. Its
// appends go through appendAsLeader and wait in the produce purgatory
// until the high watermark passes them (acks=all), for at most
// offsets.commit.timeout.ms.
//
// # Remote WAL: leader changes and stores
//
// On a leader change the broker stops the old role and calls
// Replicator.StartLeader with the new epoch and the log end, where the
// partition continues; the remote-WAL side (package rwnode) publishes the
// dead range of the older epochs and picks the rack's store. The broker's
// only part in per-rack stores is the configuration:
// remote.wal.storage.url.<rack> (RackStorageURLKey) and a {rack} template
// in remote.wal.storage.url.
//
// # Controller
//
// Controller decides leaders, replicas, ISRs and epochs; brokers subscribe
// and apply what concerns them (applyTopic), dropping stale states by
// partition epoch. MemController keeps it in memory: shared by the brokers
// of one process, or, given the same static cluster.brokers list, computed
// alike by every process (AssignReplicas is deterministic and rack-aware).
// KafkaController keeps it in a one-partition compacted topic of the
// metadata Kafka cluster, applied in log order by every broker (the log
// order is the consensus; see controller_kafka.go); kwal broker uses it
// when controller.bootstrap.servers (default:
// remote.wal.metadata.bootstrap.servers) is set.
//
// # Where the metadata topic lives
//
// remote.wal.metadata.bootstrap.servers may name this cluster's own
// brokers, as the KIP intends: __remote_wal_log_metadata is then an
// ordinary topic of the cluster (classic replication, compact+delete,
// 50 partitions, RF min(3, cluster.brokers)), created by the first
// replicator that reaches it, and each broker's remote WAL is built once
// the cluster answers (rwnode.DeferredReplicator): until then remotewal
// leaders upload nothing and followers rebuild nothing, so acks=all
// produces to remotewal topics wait. The controller's __kwal_cluster_state
// cannot live there (the cluster would elect the leaders of its own
// controller log through itself), so it needs controller.bootstrap.servers
// naming another Kafka; kwal broker refuses to start otherwise.
//
// The one-process default (no bootstrap: an embedded kfake) keeps kfake
// for both. Hosting the metadata topic on a single broker would give it
// RF 1 and tie the remote WAL's start to that broker answering itself,
// for no gain: one broker has no followers to rebuild, and kwal demo's
// three in-process brokers share one controller in memory, where kfake
// starts in milliseconds. Self-hosting is for multi-process clusters,
// which need an outside Kafka for the controller log anyway.
//
// # Topic administration (topicadmin.go, topiclifecycle.go)
//
//	DeleteTopics v0-6  CreatePartitions v0-3  AlterConfigs v0-2
//	IncrementalAlterConfigs v0-1  DescribeCluster v0-1  DescribeConfigs v0-4
//	DeleteRecords v0-2 (api_delete_records.go: the leader's log start
//	moves, followers follow it from fetch responses, the answer waits for
//	the ISR's low watermark)
//
// A topic has an id (Kafka's topic id, random at creation) and an epoch
// bumped by every partition-count or config change; the controllers' delete-
// topic, create-partitions and alter-configs changes are checked against
// the incarnation and epoch they were asked for (a KafkaController record
// of each kind, applied alike by every controller). A deletion reaches
// subscribers as the topic's last state with Deleted set: every replica
// stops, its log directory is renamed to <dir>.<random>-delete and
// removed (a crash in between leaves only the -delete directory, removed
// at the next start), and a remotewal replica's Replicator, when it is a
// PartitionDeleter, publishes the partition's deletion and collects its
// objects (rwnode). Each partition directory holds partition.metadata
// with its topic id: a directory of another incarnation (a deletion this
// broker missed) is removed before the new topic's log opens, so a topic
// created again starts empty at offset 0; against a DurableController
// (KafkaController) a starting broker also removes the partition
// directories no current topic assigns to it (stray replicas of topics
// deleted while it was down). Config changes reach open
// replicas (kafkalog.Log.Retune, min.insync.replicas in the leader
// machine, LogAppendTime stamping, the compacted-topic key rule).
//
// # Liveness and election
//
// The mechanism is heartbeat records on the metadata Kafka, in the same
// __kwal_cluster_state log as every other cluster-state change. Why there
// and not, say, consumer-group membership: the state is already a log
// that every broker applies in order, so a fence is just one more
// epoch-checked proposal ordered against registrations, ISR changes and
// elections, with no second source of truth to reconcile; the session
// lives in no single process, so it survives the restart of any broker;
// and group membership would make the group coordinator, not the log,
// decide who is alive, with its own rebalance timing.
//
//   - A broker registers at start (a "broker" record). The registration's
//     broker epoch is the record's offset (as Kafka's is), so every life
//     has a new one and a heartbeat or fence of an earlier life does not
//     count. A live earlier life is fenced first: a restarted broker may
//     have lost its unflushed tail and must not go on leading. (Without
//     liveness, as MemController runs by default, registrations change no
//     leadership.)
//   - Every broker.heartbeat.interval.ms (default 2 s) it writes a
//     heartbeat record (key heartbeat/<id>, compacted; no state depends on
//     one). Every controller notes, on its own clock, when it applied the
//     last heartbeat of each live registration (sessionTracker). A
//     heartbeat is acknowledged only once the sender's controller has
//     applied it, and it is judged at its place in the log (checkHeartbeat):
//     one written after a fence of its registration is refused, even when
//     the sender had not applied that fence yet (a broker resumed after a
//     pause: its controller lags, and judged on that stale view, its
//     heartbeat renewed the lease of a leadership it had lost, issue 11).
//   - Every controller checks every quarter broker.session.timeout.ms
//     (default 9 s); when a session has expired it first catches up with
//     the log's end (a controller that was paused or cut off has missed
//     heartbeats, not brokers), then proposes a fence of (id, broker
//     epoch). The first fence applied wins; the others are refused. A
//     controller that starts gives every registration a fresh session.
//   - Applying a fence (fenceBroker, pure) takes the broker out of every
//     ISR, except as the last member (kept so it is electable, cleanly,
//     when it returns), and elects a new leader where it led: the first
//     replica, in replica order, in the ISR and live (Kafka's
//     PartitionChangeBuilder), else, with unclean.leader.election.enable
//     (topic, or the proposer's broker default), the first live replica,
//     logged at ERROR; else no leader (-1, LEADER_NOT_AVAILABLE in
//     Metadata). The leader epoch is bumped on every leader change. A
//     registration elects leaders for leaderless partitions it can lead.
//   - A log dir offline (logdir.go): the broker proposes a
//     "log-dir-offline" record (key log-dir/<id>/<proposal>, never
//     compacted) as soon as its dir fails, and again before each
//     heartbeat until one is applied. Applying it (logDirOffline, pure)
//     marks the registration LogDirOffline and does what a fence does to
//     the partitions (out of every ISR but as a last member, a new leader
//     where it led) while the registration stays live: its heartbeats
//     count, but it is elected nowhere, joins no ISR, is listed offline in
//     Metadata, and new partitions place it outside their ISR, until a new
//     registration (a restart onto a healthy dir). A repeated report is a
//     no-op; one from an earlier life or behind a fence is refused. A
//     broker fenced while its dir is offline does not register again.
//   - auto.leader.rebalance.enable (default true): every
//     leader.imbalance.check.interval.seconds each broker proposes itself
//     for the partitions whose first replica it is, when it is in the ISR
//     (has caught up) and live (ElectPreferred, epoch-checked).
//   - Self-fencing: a broker's lease is the send time of its last
//     acknowledged heartbeat plus the session timeout. A controller fences
//     only a session timeout after applying a heartbeat, which is after it
//     was sent, so the lease runs out first: a leader cut off from the
//     metadata Kafka, or paused, answers produces NOT_LEADER_OR_FOLLOWER
//     and completes no acks=all wait before anyone else can be elected.
//     When it is heard again and finds itself fenced, it registers anew.
//     The lease is checked when a produce arrives, again once its records
//     are appended (the process may have stopped in between), and when an
//     acks=all wait completes. With the lease run out the broker proposes
//     no ISR shrink and parks the remote-WAL slice task of every remotewal
//     partition it leads (StopLeader); a lease renewed at the same leader
//     epoch restarts it at the log end, a new role replaces it.
//
// MemController applies the same records to the same state machine
// (clusterState); with EnableLiveness, heartbeats are timed on its
// injected clock and CheckLiveness (or RunLiveness) fences. The decisions
// are in liveness.go, the records in clusterstate.go, the broker's side in
// heartbeat.go.
//
// # Concurrency
//
// A connection is served by a reader goroutine, one request at a time,
// and a writer goroutine that sends responses in request order (an
// acks=all produce may wait while the next request is read, up to 8 in
// flight and kwal.connection.max.buffered.bytes); buffers above 1 MiB are
// dropped after use. Delayed produces and fetches wait in two purgatories keyed by
// topic-partition; the connection goroutine blocks until the operation
// completes, expires or the broker closes. Broker.mu guards the partition
// map and the connection set. Each partition has appendMu (appends,
// truncation, role changes; it holds a producer's entry in the log still
// between the sequence check and the append) taken before mu (controller
// state and the replica.Leader machine); the leader's HW is published to
// the log under hwMu, after mu is released. A replica fetcher drives its
// replica.Follower machines under its own mu and carries out their actions
// outside it. Controller notifications run in the goroutine that made the
// change and must not call the controller back while holding a partition
// lock. One replica-fetcher goroutine per leader broker; Close
// stops fetchers, the ISR, retention and producer-expiration loops, the
// accept loop and the connections, then
// completes waiting operations and closes the logs.
//
// Broker.Changed is a broadcast (changefeed.Feed) closed at the next change of
// what the broker serves: a log change (kafkalog Config.OnChange), a
// topic state applied, a follower's fetch recorded on the leader, a group
// coordinator change (group Config.OnChange). MemController and
// KafkaController have their own Changed. Tests wait on these (waitFor in
// helpers_test.go) instead of polling.
//
// # Tests and time
//
// Broker tests run on a manual clock (clock.Manual): startCluster shares
// one between its brokers (testCluster.clk), and the tests that build
// brokers themselves give them one. Time passes only when a test about
// time advances it (sessions, ISR lag, acks=all and retention timeouts,
// group sessions), to a computed deadline. Every periodic loop's timer is
// armed in New, so an advance right after New reaches it. Two rules make
// those deadlines exact whatever the goroutine schedule:
//   - a fetch's long poll and an acks=all produce's timeout count from the
//     request's arrival, the clock reading the leader recorded the
//     follower's fetch time at (purgatory.Op.Start), not from when the
//     handler got to arm them; so a test that saw a follower's fetch and
//     advanced past its max.wait.ms gets it answered (advanceFetching
//     steps the clock while named followers keep fetching);
//   - the ISR check runs at a fixed rate (isrLoop): a follower that lags
//     past replica.lag.time.max.ms is out by the next check after that,
//     at most half the limit later, not one scheduling delay per pass
//     later.
//
// The tests left on the wall clock (onRealClock), and why:
//   - kcat_test.go (TestKcatProduceConsume and its cases),
//     kcat_security_test.go (TestKcatTLSAndSASL): kcat (librdkafka) runs
//     as a subprocess with its own timers, and `kcat -e` ends only on an
//     empty answer to its fetch long poll, which a manual clock would hold
//     for ever.
//   - Nothing else. Network deadlines (the slowloris/read timeout, the TLS
//     handshake timeout, socket write deadlines) are wall-clock socket
//     deadlines in every test; the reaper that enforces the read and idle
//     timeouts runs on the manual clock (conn_limits_test.go).
//
// # Zero-copy fetch
//
// On a connection whose bytes go unchanged onto TCP (PLAINTEXT and
// SASL_PLAINTEXT listeners: PLAIN and SCRAM do not wrap the stream;
// connState.sendfile, decided on the secured connection, not the raw one
// under TLS) a fetch takes each partition's record
// bytes as a kafkalog.Section (a segment-file region with its own
// duplicated descriptor, so retention, compaction or Close may drop the
// segment meanwhile) instead of reading them; the response is encoded with
// a random marker in their place, the marker cut out and the real length
// prefix written, and the connection writer sends the framing with write
// and each section with sendfile at an explicit offset (zerocopy.go). A
// marker found anywhere else makes that response copy its records. SSL
// and SASL_SSL connections (every byte is encrypted, as Kafka's
// SslTransportLayer copies), MemFS logs and Config.ZeroCopyFetchDisabled
// copy.
package broker
