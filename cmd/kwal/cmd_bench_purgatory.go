package main

import (
	"io"

	"github.com/kwal/kwal/cmd/kwal/internal/purgbench"
)

func init() {
	register(command{
		words: []string{"bench", "purgatory"},
		short: "timing wheel and purgatory against Go timers, side by side",
		run: func(args []string, stdout, stderr io.Writer) error {
			fs := newFlagSet("bench purgatory", stderr)
			quick := fs.Bool("quick", false, "small sizes for CI (under 30 s)")
			runs := fs.Int("runs", 3, "runs per contestant and workload; figures are medians")
			seed := fs.Uint64("seed", 1176, "seed shared by all contestants")
			jsonOut := fs.String("json", "", `write every figure as JSON to this file ("-" for stdout, instead of the table)`)
			quiet := fs.Bool("q", false, "no progress lines on stderr")
			if err := fs.Parse(args); err != nil {
				return err
			}
			cfg := purgbench.Config{Quick: *quick, Runs: *runs, Seed: *seed}
			if !*quiet {
				cfg.Progress = stderr
			}
			rep, err := purgbench.Run(cfg)
			if err != nil {
				return err
			}
			switch *jsonOut {
			case "":
				return rep.WriteTable(stdout)
			case "-":
				return rep.WriteJSON(stdout)
			default:
				if err := writeFileWith(*jsonOut, rep.WriteJSON); err != nil {
					return err
				}
				return rep.WriteTable(stdout)
			}
		},
	})
}
