package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// The flag and output boilerplate the bench commands share.

// newFlagSet is a command's flag set: errors and usage go to stderr, and
// a bad flag is returned, not fatal.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseFlagsOnly parses args and refuses positional arguments.
func parseFlagsOnly(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return nil
}

// latencyModelFlag is --latency-model, the object-store latency model;
// its default is *p, or s3express if *p is empty.
func latencyModelFlag(fs *flag.FlagSet, p *string) {
	def := *p
	if def == "" {
		def = "s3express"
	}
	fs.StringVar(p, "latency-model", def, "object-store latency model: s3express, s3standard or none")
}

// writeFileWith creates path and writes it with write.
func writeFileWith(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeReportFiles creates dir and writes each file into it, by name,
// saying "wrote <path>" on stdout for each.
func writeReportFiles(stdout io.Writer, dir string, files map[string]func(io.Writer) error) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		path := filepath.Join(dir, name)
		if err := writeFileWith(path, files[name]); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\n", path)
	}
	return nil
}

// writeJSONFile writes path (its directory created if missing) with
// write and says "JSON: <path>" on stdout.
func writeJSONFile(stdout io.Writer, path string, write func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := writeFileWith(path, write); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "JSON: %s\n", path)
	return nil
}
