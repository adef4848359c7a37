package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// command is one subcommand. run gets the arguments after the command's
// words and writes its report to stdout.
type command struct {
	words []string // e.g. {"bench", "purgatory"}
	short string
	run   func(args []string, stdout, stderr io.Writer) error
}

// commands is filled by the init functions of the cmd_*.go files, once,
// before main runs; nothing changes it afterwards.
var commands []command

func register(c command) { commands = append(commands, c) }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	// The longest matching word sequence wins, so "bench purgatory" beats
	// a hypothetical "bench".
	var best *command
	for i := range commands {
		c := &commands[i]
		if len(args) < len(c.words) {
			continue
		}
		match := true
		for j, w := range c.words {
			if args[j] != w {
				match = false
				break
			}
		}
		if match && (best == nil || len(c.words) > len(best.words)) {
			best = c
		}
	}
	if best == nil {
		usage(stderr)
		if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
			return 0
		}
		fmt.Fprintf(stderr, "kwal: unknown command %q; see the list above\n", strings.Join(args, " "))
		return 2
	}
	if err := best.run(args[len(best.words):], stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			// -h or --help: the flag set printed the usage; asking for
			// help is not a failure.
			return 0
		}
		fmt.Fprintf(stderr, "kwal %s: %v\n", strings.Join(best.words, " "), err)
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "kwal: a remote write-ahead log for Kafka brokers (KIP-1176)")
	fmt.Fprintln(w, "\nusage: kwal <command> [flags]\n\ncommands:")
	cs := append([]command(nil), commands...)
	sort.Slice(cs, func(i, j int) bool {
		return strings.Join(cs[i].words, " ") < strings.Join(cs[j].words, " ")
	})
	for _, c := range cs {
		fmt.Fprintf(w, "  %-22s %s\n", strings.Join(c.words, " "), c.short)
	}
}
