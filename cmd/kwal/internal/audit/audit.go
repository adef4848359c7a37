package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/kwal/kwal/combiner"
	"github.com/kwal/kwal/combiner/objformat"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
)

// Finding kinds.
const (
	CorruptObject  = "corrupt-object"
	CorruptSlice   = "corrupt-slice"
	Orphan         = "orphan"
	Missing        = "missing"
	EntryMismatch  = "entry-mismatch"
	DeletedPresent = "deleted-present"
	// DeadAwaitingDeletion is a note, not a finding: an object still
	// stored whose every entry is dead (a new leader's DeadRange killed
	// them) and that retention has not deleted yet. It is not a leak.
	DeadAwaitingDeletion = "dead-awaiting-deletion"
)

// Finding is one disagreement.
type Finding struct {
	Kind   string `json:"kind"`
	Key    string `json:"key"`
	Detail string `json:"detail"`
}

// Stored is what the store holds for one object: its footer entries, or
// the error that made its footer unreadable.
type Stored struct {
	Size    int64
	Entries []metadata.SliceEntry
	Err     error
}

// Report is an audit's result.
type Report struct {
	Objects         int       `json:"objects"`
	Bytes           int64     `json:"bytes"`
	Slices          int       `json:"slices"`
	MetadataObjects int       `json:"metadata_objects"`
	MetadataChecked bool      `json:"metadata_checked"`
	Findings        []Finding `json:"findings"`
	// Notes are states that are not faults (DeadAwaitingDeletion).
	Notes []Finding `json:"notes"`
	// DeadSlices counts the metadata entries a dead range killed;
	// DeadGone the objects whose every entry is dead and that are no
	// longer stored (fine: nothing needs them).
	DeadSlices int `json:"dead_slices"`
	DeadGone   int `json:"dead_gone"`
	// UnpublishedSlices counts the slices of published objects that no
	// metadata entry names (the combiner gave them up for their own
	// partition and published the rest of the object); DeadBytes is the
	// stored bytes of those slices and of the dead ones, which nothing
	// reads and which go with their object.
	UnpublishedSlices int   `json:"unpublished_slices"`
	DeadBytes         int64 `json:"dead_bytes"`
	// OtherStores counts the metadata objects in other stores than the
	// audited one (Config.StoreID), left out.
	OtherStores int            `json:"other_stores"`
	Counts      map[string]int `json:"counts"`
}

// OK reports whether the audit found nothing.
func (r *Report) OK() bool { return len(r.Findings) == 0 }

// Comparison is what Compare found: faults, notes and dead-range counts.
type Comparison struct {
	Findings          []Finding
	Notes             []Finding
	DeadSlices        int
	DeadGone          int
	UnpublishedSlices int
	DeadBytes         int64
}

// Compare checks stored objects against metadata snapshots (nil snaps:
// only the objects themselves are checked). dead (State.DeadFrom; nil:
// nothing is dead) accounts for the dead ranges of leader changes: dead
// entries are left out of the footer-versus-metadata comparison, an
// object whose every entry is dead is not missing when the store no
// longer has it, and one still stored is a DeadAwaitingDeletion note.
//
// An object may be published with fewer entries than its footer holds:
// the combiner leaves out the slices it gave up for their own partition
// (no head-of-line blocking across partitions). Footer entries that no
// metadata entry names are counted (UnpublishedSlices, DeadBytes), not
// found; a metadata entry the footer does not hold is an EntryMismatch.
func Compare(stored map[string]Stored, snaps []metadata.ObjectSnapshot, checkMetadata bool, dead metadata.DeadFromFunc) Comparison {
	var c Comparison
	out := c.Findings
	keys := make([]string, 0, len(stored))
	for k := range stored {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := stored[k].Err; err != nil {
			out = append(out, Finding{CorruptObject, k, err.Error()})
		}
	}
	if !checkMetadata {
		c.Findings = out
		return c
	}
	byKey := map[string]metadata.ObjectSnapshot{}
	allDead := map[string]bool{}
	for _, s := range snaps {
		byKey[s.Key] = s
		n, d := 0, 0
		for _, e := range metaEntries(s) {
			n++
			if isDead(e, dead) {
				d++
			}
		}
		c.DeadSlices += d
		allDead[s.Key] = n > 0 && d == n
	}
	for _, k := range keys {
		st := stored[k]
		snap, ok := byKey[k]
		state := leastState(snap)
		switch {
		case !ok || state == metadata.CopySegmentStarted:
			out = append(out, Finding{Orphan, k, "no metadata reached COPY_SEGMENT_FINISHED"})
		case state == metadata.DeleteSegmentFinished:
			out = append(out, Finding{DeletedPresent, k, "metadata says DELETE_SEGMENT_FINISHED"})
		case st.Err == nil:
			meta := metaEntries(snap)
			unpub, unpubBytes := unpublished(st.Entries, meta)
			if d := diffEntries(live(published(st.Entries, meta), dead), live(meta, dead)); d != "" {
				out = append(out, Finding{EntryMismatch, k, d})
				break
			}
			c.UnpublishedSlices += unpub
			c.DeadBytes += unpubBytes + deadBytes(st.Entries, meta, dead)
			if allDead[k] && state == metadata.CopySegmentFinished {
				c.Notes = append(c.Notes, Finding{DeadAwaitingDeletion, k, "every entry is past a new leader's log end (dead range); retention deletes it"})
			}
		}
	}
	metaKeys := make([]string, 0, len(byKey))
	for k := range byKey {
		metaKeys = append(metaKeys, k)
	}
	slices.Sort(metaKeys)
	for _, k := range metaKeys {
		if _, ok := stored[k]; ok {
			continue
		}
		if st := leastState(byKey[k]); st == metadata.CopySegmentFinished {
			if allDead[k] {
				c.DeadGone++
				continue
			}
			out = append(out, Finding{Missing, k, "metadata says COPY_SEGMENT_FINISHED but the store has no such object"})
		}
	}
	c.Findings = out
	return c
}

// published keeps the footer entries that some metadata entry names.
func published(footer, meta []metadata.SliceEntry) []metadata.SliceEntry {
	named := make(map[string]bool, len(meta))
	for _, e := range meta {
		named[entryKey(e)] = true
	}
	out := make([]metadata.SliceEntry, 0, len(footer))
	for _, e := range footer {
		if named[entryKey(e)] {
			out = append(out, e)
		}
	}
	return out
}

// unpublished counts the footer entries no metadata entry names, and their
// stored bytes.
func unpublished(footer, meta []metadata.SliceEntry) (int, int64) {
	pub := published(footer, meta)
	var n int64
	for _, e := range footer {
		n += e.Length
	}
	for _, e := range pub {
		n -= e.Length
	}
	return len(footer) - len(pub), n
}

// deadBytes is the stored bytes of the published entries a dead range
// killed.
func deadBytes(footer, meta []metadata.SliceEntry, dead metadata.DeadFromFunc) int64 {
	var n int64
	for _, e := range published(footer, meta) {
		if isDead(e, dead) {
			n += e.Length
		}
	}
	return n
}

func isDead(e metadata.SliceEntry, dead metadata.DeadFromFunc) bool {
	if dead == nil {
		return false
	}
	from, ok := dead(e.TopicPartition, e.LeaderEpoch)
	_, live := metadata.LiveEnd(&e, from, ok)
	return !live
}

// live drops the dead entries.
func live(entries []metadata.SliceEntry, dead metadata.DeadFromFunc) []metadata.SliceEntry {
	var out []metadata.SliceEntry
	for _, e := range entries {
		if !isDead(e, dead) {
			out = append(out, e)
		}
	}
	return out
}

// leastState is the least advanced state over an object's parts.
func leastState(s metadata.ObjectSnapshot) metadata.SegmentState {
	st := metadata.DeleteSegmentFinished
	for _, p := range s.Parts {
		st = min(st, p.State)
	}
	return st
}

func metaEntries(s metadata.ObjectSnapshot) []metadata.SliceEntry {
	var out []metadata.SliceEntry
	for _, p := range s.Parts {
		out = append(out, p.Entries...)
	}
	return out
}

func entryKey(e metadata.SliceEntry) string {
	return fmt.Sprintf("%s/%d@%d:%d-%d+%d/%d crc %08x", e.Topic, e.Partition, e.LeaderEpoch, e.BaseOffset, e.LastOffset, e.Position, e.Length, e.CRC32C)
}

func diffEntries(footer, meta []metadata.SliceEntry) string {
	a := map[string]bool{}
	for _, e := range footer {
		a[entryKey(e)] = true
	}
	b := map[string]bool{}
	for _, e := range meta {
		b[entryKey(e)] = true
	}
	var onlyFooter, onlyMeta []string
	for k := range a {
		if !b[k] {
			onlyFooter = append(onlyFooter, k)
		}
	}
	for k := range b {
		if !a[k] {
			onlyMeta = append(onlyMeta, k)
		}
	}
	if len(onlyFooter) == 0 && len(onlyMeta) == 0 {
		return ""
	}
	slices.Sort(onlyFooter)
	slices.Sort(onlyMeta)
	return fmt.Sprintf("only in footer: [%s]; only in metadata: [%s]", strings.Join(onlyFooter, ", "), strings.Join(onlyMeta, ", "))
}

// Config is one audit.
type Config struct {
	Store objstore.Store
	// Prefix is the combiner's key prefix ("" by default).
	Prefix string
	// Metadata, when set, is the metadata state to compare with.
	Metadata *metadata.State
	// StoreID is the id of Store as the brokers name it in the events'
	// bucket field: its rack with one store per rack
	// (remote.wal.storage.url.<rack>), "" for the default store. Objects
	// the metadata places in other stores are left out (counted in
	// Report.OtherStores).
	StoreID string
	// VerifySlices reads every slice's stored bytes and checks its CRC32C.
	VerifySlices bool
	Logger       *slog.Logger
	// Progress, if set, gets a line per 100 objects.
	Progress io.Writer
}

// Run lists the WAL objects, reads their footers (and slices, if asked) and
// compares them with the metadata.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	stored := map[string]Stored{}
	rep := &Report{Counts: map[string]int{}}
	var sliceFindings []Finding
	err := objstore.ListAll(ctx, cfg.Store, combiner.WALPrefix(cfg.Prefix), func(o objstore.ObjectInfo) error {
		if !combiner.IsWALKey(cfg.Prefix, o.Key) {
			return nil
		}
		entries, size, err := combiner.ReadObjectFooter(ctx, cfg.Store, o.Key, cfg.Logger)
		if err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
		stored[o.Key] = Stored{Size: size, Entries: entries, Err: err}
		rep.Objects++
		rep.Bytes += o.Size
		rep.Slices += len(entries)
		if err == nil && cfg.VerifySlices {
			for _, e := range entries {
				b, gerr := cfg.Store.GetRange(ctx, o.Key, e.Position, e.Length)
				if gerr == nil {
					_, gerr = objformat.ReadSlice(b, e)
				}
				if gerr != nil {
					sliceFindings = append(sliceFindings, Finding{CorruptSlice, o.Key, fmt.Sprintf("%s [%d,%d]: %v", e.TopicPartition, e.BaseOffset, e.LastOffset, gerr)})
				}
			}
		}
		if cfg.Progress != nil && rep.Objects%100 == 0 {
			fmt.Fprintf(cfg.Progress, "\raudited %d objects", rep.Objects)
		}
		return nil
	})
	if cfg.Progress != nil && rep.Objects >= 100 {
		fmt.Fprintln(cfg.Progress)
	}
	if err != nil {
		return nil, fmt.Errorf("audit: listing the store: %w", err)
	}
	var (
		snaps []metadata.ObjectSnapshot
		dead  metadata.DeadFromFunc
	)
	if cfg.Metadata != nil {
		for _, o := range cfg.Metadata.Objects() {
			if o.Bucket != cfg.StoreID {
				rep.OtherStores++
				continue
			}
			snaps = append(snaps, o)
		}
		rep.MetadataObjects = len(snaps)
		rep.MetadataChecked = true
		dead = cfg.Metadata.DeadFrom
	}
	cmp := Compare(stored, snaps, cfg.Metadata != nil, dead)
	rep.Findings = append(cmp.Findings, sliceFindings...)
	rep.Notes, rep.DeadSlices, rep.DeadGone = cmp.Notes, cmp.DeadSlices, cmp.DeadGone
	rep.UnpublishedSlices, rep.DeadBytes = cmp.UnpublishedSlices, cmp.DeadBytes
	for _, f := range rep.Findings {
		rep.Counts[f.Kind]++
	}
	for _, f := range rep.Notes {
		rep.Counts[f.Kind]++
	}
	return rep, nil
}

// WriteText prints a summary and every finding.
func WriteText(w io.Writer, r *Report) {
	fmt.Fprintf(w, "audited %d objects (%d bytes, %d slices)", r.Objects, r.Bytes, r.Slices)
	if r.MetadataChecked {
		fmt.Fprintf(w, " against %d objects in the metadata", r.MetadataObjects)
		if r.OtherStores > 0 {
			fmt.Fprintf(w, " (%d more in other stores, not audited here)", r.OtherStores)
		}
	} else {
		fmt.Fprint(w, " (no metadata given: objects checked alone)")
	}
	fmt.Fprintln(w)
	if r.DeadSlices > 0 {
		fmt.Fprintf(w, "%d metadata entries are dead (past a new leader's log end); %d objects of only dead entries are already gone, %d await deletion\n",
			r.DeadSlices, r.DeadGone, len(r.Notes))
	}
	if r.UnpublishedSlices > 0 {
		fmt.Fprintf(w, "%d slices of published objects are unpublished (given up for their own partition; their object was published without them)\n", r.UnpublishedSlices)
	}
	if r.DeadBytes > 0 {
		fmt.Fprintf(w, "%d bytes of stored objects are dead (unpublished or dead slices), deleted with their objects\n", r.DeadBytes)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note %s %s: %s\n", n.Kind, n.Key, n.Detail)
	}
	if r.OK() {
		fmt.Fprintln(w, "no findings")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "kind\tkey\tdetail")
	for _, f := range r.Findings {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Kind, f.Key, f.Detail)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d findings\n", len(r.Findings))
}

// WriteJSON writes the report.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
