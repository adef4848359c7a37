package broker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"time"

	"github.com/kwal/kwal/kafkalog"
)

// The broker's one log dir (log.dirs), as Kafka's JBOD handling treats a
// log dir with a single dir: unusable at start, the broker refuses to
// start, naming the directory and what to do; failed at run time (an I/O
// error appending, flushing, rolling or opening a log), the dir is marked
// offline once, with one ERROR line: from then on every partition of the
// broker answers KAFKA_STORAGE_ERROR to Produce and Fetch, Metadata lists
// the broker among the partitions' offline replicas, and /metrics shows
// kwal_log_dir_offline 1. It stays offline until the broker restarts (as
// in Kafka, where a failed dir comes back only with a restart).
//
// The broker also hands its leaderships off (Kafka's
// ReplicaManager.handleLogDirFailure, and in KRaft the offline dirs of a
// broker heartbeat, KIP-858): the first failure wakes the heartbeat loop,
// which reports the dir offline to the controller at once
// (Controller.ReportLogDirOffline); a report that fails is sent again
// before every heartbeat, so the leaderships move within one
// broker.heartbeat.interval.ms. The controller takes the broker out of
// every ISR and elects new leaders from the rest of the ISR; it elects
// the broker nowhere until it registers again. The broker stays
// registered and heartbeating; if it is fenced meanwhile it does not
// register again (a Kafka broker whose only log dir failed shuts down):
// only a restart onto a healthy dir brings it back.

// ErrLogDirOffline: the log dir had an I/O error and is offline.
var ErrLogDirOffline = errors.New("broker: log dir offline")

// logDirHealth is whether the log dir is offline, and why.
type logDirHealth struct {
	// failed wakes the heartbeat loop once the dir goes offline (made in
	// New, one slot).
	failed chan struct{}
	mu     struct {
		sync.Mutex
		offline bool
		since   time.Time
		cause   string
		// reported is the broker epoch whose registration the controller
		// has marked offline (0: none yet).
		reported int64
		// retired: fenced with the dir offline, logged once; the broker
		// does not register again.
		retired bool
	}
}

func (h *logDirHealth) offline() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mu.offline
}

// isStorageError says whether err, from a log operation, is the file
// system failing (a read-only mount, an I/O error, a full disk, a
// directory gone) rather than a refusal of the data.
func isStorageError(err error) bool {
	if err == nil {
		return false
	}
	var pe *fs.PathError
	var le *os.LinkError
	var errno syscall.Errno
	return errors.As(err, &pe) || errors.As(err, &le) || errors.As(err, &errno)
}

// storageFailed marks the log dir offline if err is a storage error; the
// first one logs the one ERROR line. It reports whether the dir is
// offline now.
func (b *Broker) storageFailed(what string, tp TopicPartition, err error) bool {
	if !isStorageError(err) {
		return b.dir.offline()
	}
	b.dir.mu.Lock()
	first := !b.dir.mu.offline
	if first {
		b.dir.mu.offline, b.dir.mu.since, b.dir.mu.cause = true, b.clock.Now(), err.Error()
	}
	b.dir.mu.Unlock()
	if first {
		b.logger.Error("log dir offline: every partition of this broker now answers KAFKA_STORAGE_ERROR until it restarts, "+
			"and its leaderships move to other replicas; fix the file system (read-only mount, full disk, failing device) and restart the broker",
			"log_dir", b.cfg.LogDir, "while", what, "partition", tp, "err", err)
		select {
		case b.dir.failed <- struct{}{}:
		default:
		}
	}
	return true
}

// reportLogDir tells the controller that the log dir is offline, once per
// registration: the controller moves this broker's leaderships and takes
// it out of every ISR. A failed report is retried at the next heartbeat.
func (b *Broker) reportLogDir() {
	if !b.dir.offline() {
		return
	}
	epoch := b.BrokerEpoch()
	b.dir.mu.Lock()
	done := b.dir.mu.reported == epoch
	b.dir.mu.Unlock()
	if done {
		return
	}
	err := b.ctrl.ReportLogDirOffline(b.cfg.BrokerID, epoch)
	switch {
	case err == nil:
		b.dir.mu.Lock()
		b.dir.mu.reported = epoch
		b.dir.mu.Unlock()
		b.logger.Warn("reported the log dir offline to the controller: this broker leads nothing and is in no ISR until it restarts",
			"log_dir", b.cfg.LogDir, "broker_epoch", epoch)
	case errors.Is(err, ErrBrokerFenced):
		// Fenced: it leads nothing already, and this registration will
		// not come back; the heartbeat sees it too. Not sent again.
		b.dir.mu.Lock()
		b.dir.mu.reported = epoch
		b.dir.mu.Unlock()
	default:
		b.logger.Warn("reporting the log dir offline to the controller failed; retrying before the next heartbeat",
			"log_dir", b.cfg.LogDir, "broker_epoch", epoch, "err", err)
	}
}

// retireFenced is what a fenced broker does instead of registering again
// while its log dir is offline: nothing, but say so once.
func (b *Broker) retireFenced(epoch int64) {
	b.dir.mu.Lock()
	first := !b.dir.mu.retired
	b.dir.mu.retired = true
	b.dir.mu.Unlock()
	if first {
		b.logger.Error("fenced by the controller with the log dir offline: not registering again; restart the broker once the log dir is healthy",
			"log_dir", b.cfg.LogDir, "broker_epoch", epoch)
	}
}

// logDirOfflineErr is the error of an operation refused because the log
// dir is offline.
func (b *Broker) logDirOfflineErr() error {
	b.dir.mu.Lock()
	defer b.dir.mu.Unlock()
	return fmt.Errorf("%w: log.dirs=%q since %s: %s", ErrLogDirOffline, b.cfg.LogDir, b.dir.mu.since.Format(time.RFC3339), b.dir.mu.cause)
}

// partitionDirName matches the directories of partitions: topic-N.
var partitionDirName = regexp.MustCompile(`^.+-[0-9]+$`)

// checkPartitionDirs proves every partition directory under dir writable
// through fsys (as CheckLogDir does for dir itself): a broker whose logs
// cannot be written would listen and then fail every partition. Errors
// wrap ErrConfig and name the directory and what to do.
func checkPartitionDirs(dir string, fsys kafkalog.FS) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("%w: log.dirs=%q: cannot list it: %v; point log.dirs at a directory this process can read and write", ErrConfig, dir, err)
	}
	for _, e := range entries {
		if !e.IsDir() || !partitionDirName.MatchString(e.Name()) {
			continue
		}
		sub := filepath.Join(dir, e.Name())
		if err := probeDir(fsys, sub); err != nil {
			return fmt.Errorf("%w: log.dirs=%q is unusable: cannot write in its partition directory %s: %v; "+
				"kwal has one log dir, so it does not start: make the directory writable again (remount it read-write, "+
				"fix its owner or permissions, free space) or move that partition directory out of log.dirs",
				ErrConfig, dir, sub, err)
		}
	}
	return nil
}

// probeDir creates, writes, syncs and removes a file in dir through fsys.
func probeDir(fsys kafkalog.FS, dir string) error {
	p := filepath.Join(dir, probeFile)
	f, err := fsys.Create(p)
	if err != nil {
		return err
	}
	_, err = f.WriteAt([]byte("kwal\n"), 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if rerr := fsys.Remove(p); err == nil {
		err = rerr
	}
	return err
}
