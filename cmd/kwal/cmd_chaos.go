package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kwal/kwal/cmd/kwal/internal/chaos"
)

func init() {
	register(command{
		words: []string{"chaos"},
		short: "run seeded fault schedules against a cluster (in process, or --runner process) and check the history (--seed N replays one)",
		run:   runChaos,
	})
}

func runChaos(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kwal chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seed := fs.Int64("seed", -1, "run (replay) this one seed; default: --seeds seeds from --first")
	first := fs.Uint64("first", 1, "first seed of a run of many")
	seeds := fs.Int("seeds", 10, "how many seeds to run")
	runner := fs.String("runner", chaos.RunnerInProcess, "where the brokers run: inprocess (one process, fast) or process (kwal broker processes, versitygw, loopback proxies, real signals)")
	length := fs.Duration("length", 0, "how long each schedule runs the workload with faults (0: 1s in process, with every timeout scaled to it, 10s across processes)")
	kinds := fs.String("kinds", "", "comma-separated fault kinds (default all): "+kindList())
	uploadTimeout := fs.Duration("upload-timeout", 0, "the combiner's upload timeout (0: its default, one minute); shorter than the store outages reaches the give-up and resubmit path")
	strictGaps := fs.Bool("strict-failover-gaps", true, "fail a schedule for a remote-WAL range a leader change left out of the store (=false: only report it)")
	printOnly := fs.Bool("print", false, "print the schedules, run nothing")
	keepGoing := fs.Bool("keep-going", false, "run every seed even after one fails")
	verbose := fs.Bool("v", false, "log the cluster (INFO) to stderr")
	phases := fs.Bool("phases", false, "print where each schedule's wall time went")
	logDir := fs.String("log-dir", "", "write each schedule's cluster log (INFO) to DIR/seed-N.log, kept only for the seeds that fail")
	parallel := fs.Int("parallel", 1, "run this many schedules at once, each with its own cluster, ports and directory (in process only)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *runner != chaos.RunnerInProcess && *runner != chaos.RunnerProcess {
		return fmt.Errorf("unknown runner %q (inprocess or process)", *runner)
	}
	if *runner == chaos.RunnerProcess && *uploadTimeout != 0 {
		return fmt.Errorf("--upload-timeout is for the in-process runner only: no broker key sets the combiner's upload timeout")
	}
	cfg := chaos.Config{Runner: *runner, Length: *length, UploadTimeout: *uploadTimeout, StrictFailoverGaps: *strictGaps}
	if *kinds != "" {
		for _, k := range strings.Split(*kinds, ",") {
			if !slices.Contains(chaos.AllKinds, chaos.Kind(k)) {
				return fmt.Errorf("unknown fault kind %q (known: %s)", k, kindList())
			}
			cfg.Kinds = append(cfg.Kinds, chaos.Kind(k))
		}
	}
	if *verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	list := []uint64{}
	if *seed >= 0 {
		list = append(list, uint64(*seed))
	} else {
		for i := range *seeds {
			list = append(list, *first+uint64(i))
		}
	}
	if *printOnly {
		for _, s := range list {
			cfg.Seed = s
			fmt.Fprint(stdout, chaos.Generate(s, cfg.ScheduleOptions()))
		}
		return nil
	}
	if *logDir != "" {
		if err := os.MkdirAll(*logDir, 0o755); err != nil {
			return err
		}
	}
	if *parallel < 1 {
		return fmt.Errorf("--parallel %d: at least 1", *parallel)
	}
	if *parallel > 1 && *runner == chaos.RunnerProcess {
		return fmt.Errorf("--parallel is for the in-process runner only (the process runner's versitygw and proxies are one set)")
	}
	var tot totals
	tot.faults = map[chaos.Kind]int{}
	start := time.Now()
	var (
		mu       sync.Mutex // tot, failed, stop and stdout
		failed   []uint64
		stop     bool
		firstErr error
	)
	next := make(chan uint64)
	var wg sync.WaitGroup
	for range *parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range next {
				c := cfg // each schedule has its own cluster, ports and directory
				rep, err := runOne(c, s, *logDir)
				mu.Lock()
				replay := fmt.Sprintf("go run ./cmd/kwal chaos --seed %d --runner %s", s, *runner)
				switch {
				case err != nil && !*keepGoing:
					if firstErr == nil {
						firstErr = fmt.Errorf("seed %d: %w (replay: %s)", s, err, replay)
					}
					stop = true
				case err != nil:
					// A cluster that did not start is counted, not a
					// reason to stop a long run.
					fmt.Fprintf(stdout, "seed %d NOT RUN: %v (replay: %s)\n", s, err, replay)
					tot.notRun++
					failed = append(failed, s)
				default:
					if len(list) == 1 {
						fmt.Fprint(stdout, rep.Schedule)
					}
					fmt.Fprint(stdout, rep.Summary())
					if *phases {
						fmt.Fprintf(stdout, "  phases: %s\n", rep.PhaseString())
					}
					tot.add(rep)
					if !rep.OK() {
						failed = append(failed, s)
						stop = stop || !*keepGoing
					}
				}
				mu.Unlock()
			}
		}()
	}
	for _, s := range list {
		mu.Lock()
		done := stop
		mu.Unlock()
		if done {
			break
		}
		next <- s
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	tot.print(stdout, time.Since(start), *parallel)
	if len(failed) > 0 {
		slices.Sort(failed)
		return fmt.Errorf("%d schedules broke an invariant: seeds %v", len(failed), failed)
	}
	return nil
}

// runOne runs seed s of cfg in a directory of its own; with logDir, its
// cluster log goes to logDir/seed-N.log, removed if the seed passes.
func runOne(cfg chaos.Config, s uint64, logDir string) (_ *chaos.Report, err error) {
	dir, err := os.MkdirTemp("", "kwal-chaos-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cfg.Seed, cfg.Dir = s, dir
	if logDir != "" {
		name := filepath.Join(logDir, fmt.Sprintf("seed-%d.log", s))
		f, err := os.Create(name)
		if err != nil {
			return nil, err
		}
		cfg.Logger = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelInfo}))
		var rep *chaos.Report
		defer func() {
			f.Close()
			if err == nil && rep.OK() {
				os.Remove(name)
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		rep, err = chaos.Run(ctx, cfg)
		return rep, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	return chaos.Run(ctx, cfg)
}

func kindList() string {
	var s []string
	for _, k := range chaos.AllKinds {
		s = append(s, string(k))
	}
	return strings.Join(s, ",")
}

type totals struct {
	schedules, ok                               int
	faults                                      map[chaos.Kind]int
	sent, ackedAll, ackedOne, unknown           int
	lostOne, dupOne, lost, dup, reordered, phan int
	unread, unreadOne                           int
	readsDuring, dupEvents, gapRuns, gaps       int
	notRun                                      int
}

func (t *totals) add(r *chaos.Report) {
	t.schedules++
	if r.OK() {
		t.ok++
	}
	for k, n := range r.Schedule.Counts() {
		t.faults[k] += n
	}
	c := r.Check
	t.sent += c.Sent
	t.ackedAll += c.AckedAll
	t.ackedOne += c.AckedOne
	t.unknown += c.Unknown
	t.lostOne += c.LostOne
	t.dupOne += c.DuplicatedOne
	t.lost += c.Count(chaos.Lost)
	t.unread += c.Count(chaos.Unread)
	t.unreadOne += c.UnreadOne
	t.dup += c.Count(chaos.Duplicated)
	t.reordered += c.Count(chaos.Reordered)
	t.phan += c.Count(chaos.Phantom)
	t.readsDuring += r.ReadsDuringFaults
	t.dupEvents += r.DuplicateEvents
	if len(r.FailoverGaps) > 0 {
		t.gapRuns++
		t.gaps += len(r.FailoverGaps)
	}
}

func (t *totals) print(w io.Writer, wall time.Duration, parallel int) {
	n := t.schedules + t.notRun
	fmt.Fprintf(w, "\n%d schedules, %d passed, %d not run (the cluster did not start), wall %v (%d at once: %.1f schedules/min)\n",
		t.schedules, t.ok, t.notRun, wall.Round(time.Second), parallel, float64(n)/wall.Minutes())
	fmt.Fprint(w, "faults:")
	for _, k := range chaos.AllKinds {
		fmt.Fprintf(w, " %s %d", k, t.faults[k])
	}
	fmt.Fprintf(w, "\nrecords: sent %d, acks=all acknowledged %d (lost %d, unread by a stalled consumer %d, duplicated %d, reordered %d, phantom %d), acks=1 acknowledged %d (lost %d, unread %d, duplicated %d), unknown outcome %d\n",
		t.sent, t.ackedAll, t.lost, t.unread, t.dup, t.reordered, t.phan, t.ackedOne, t.lostOne, t.unreadOne, t.dupOne, t.unknown)
	fmt.Fprintf(w, "records read while faults ran %d; object events published twice %d; remote-WAL gaps left by a leader change: %d in %d schedules\n",
		t.readsDuring, t.dupEvents, t.gaps, t.gapRuns)
}
