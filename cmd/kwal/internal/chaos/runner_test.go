package chaos

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"
)

// TestRunSample runs a fixed sample of seeded schedules (CHAOS_SEEDS, default
// 10, from CHAOS_FIRST_SEED, default 1) against the in-process cluster;
// each must keep every invariant.
func TestRunSample(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos sample: not in -short")
	}
	n, first := envInt(t, "CHAOS_SEEDS", 10), envInt(t, "CHAOS_FIRST_SEED", 1)
	for seed := uint64(first); seed < uint64(first+n); seed++ {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var logger *slog.Logger
			if os.Getenv("CHAOS_LOG") != "" {
				logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
			}
			rep, err := Run(ctx, Config{Seed: seed, Dir: t.TempDir(), Logger: logger})
			if err != nil {
				t.Fatal(err)
			}
			t.Log(rep.Summary())
			if !rep.OK() {
				t.Fatal(rep.Summary())
			}
			if rep.Check.AckedAll == 0 {
				t.Fatal("no acks=all record was acknowledged: the workload did not run")
			}
		})
	}
}

func envInt(t *testing.T, key string, def int) int {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", key, v, err)
	}
	return n
}
