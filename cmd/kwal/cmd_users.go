package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"

	"github.com/kwal/kwal/broker"
)

func init() {
	register(command{
		words: []string{"users", "add"},
		short: "add or replace a SASL user (salted SCRAM credentials) in a users file; password from stdin",
		run: func(args []string, stdout, stderr io.Writer) error {
			return runUsersAdd(args, os.Stdin, stdout, stderr)
		},
	})
	register(command{
		words: []string{"users", "list"},
		short: "list the users of a users file and their mechanisms",
		run:   runUsersList,
	})
}

// runUsersAdd writes user's credentials. The password is the first line
// of stdin, never a flag (flags show in ps and shell history); on a
// terminal it is asked for twice with echo off.
func runUsersAdd(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kwal users add", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("file", "", "users file (kwal.sasl.users.file); created with mode 0600 if missing")
	user := fs.String("user", "", "user name")
	mechs := fs.String("mechanism", "SCRAM-SHA-256,SCRAM-SHA-512", "SCRAM mechanisms to store credentials for (PLAIN logins are checked against them)")
	iterations := fs.Int("iterations", broker.DefaultScramIterations, fmt.Sprintf("SCRAM iterations (%d..%d)", broker.MinScramIterations, broker.MaxScramIterations))
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (the password is read from stdin, never from the command line)", fs.Args())
	}
	if *file == "" || *user == "" {
		return errors.New("--file and --user are required")
	}
	var ms []string
	for _, m := range strings.Split(*mechs, ",") {
		m = strings.ToUpper(strings.TrimSpace(m))
		if m == "PLAIN" {
			return errors.New("PLAIN needs no credential of its own: it is checked against the user's SCRAM credentials")
		}
		if m != "" {
			ms = append(ms, m)
		}
	}
	if len(ms) == 0 {
		return errors.New("--mechanism: none given")
	}
	pw, err := readPassword(stdin, stderr)
	if err != nil {
		return err
	}
	if err := broker.AddUser(*file, *user, pw, ms, *iterations); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: user %s with %s (%d iterations)\n", *file, *user, strings.Join(ms, ", "), *iterations)
	return nil
}

func readPassword(stdin io.Reader, stderr io.Writer) (string, error) {
	f, isFile := stdin.(*os.File)
	tty := false
	if isFile {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	r := bufio.NewReader(stdin)
	line := func() (string, error) {
		s, err := r.ReadString('\n')
		if err != nil && !(errors.Is(err, io.EOF) && s != "") {
			return "", fmt.Errorf("reading the password from stdin: %w", err)
		}
		return strings.TrimRight(s, "\r\n"), nil
	}
	if !tty {
		return line()
	}
	// Echo off through stty; if that fails the password would show, so
	// refuse rather than echo it.
	if err := stty(f, "-echo"); err != nil {
		return "", fmt.Errorf("cannot turn terminal echo off (%v); pipe the password on stdin instead", err)
	}
	defer func() {
		stty(f, "echo")
		fmt.Fprintln(stderr)
	}()
	fmt.Fprint(stderr, "password: ")
	a, err := line()
	if err != nil {
		return "", err
	}
	fmt.Fprint(stderr, "\nagain: ")
	b, err := line()
	if err != nil {
		return "", err
	}
	if a != b {
		return "", errors.New("the passwords differ")
	}
	return a, nil
}

func stty(tty *os.File, arg string) error {
	cmd := exec.Command("stty", arg)
	cmd.Stdin = tty
	return cmd.Run()
}

func runUsersList(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kwal users list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("file", "", "users file")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *file == "" {
		return errors.New("--file is required")
	}
	f, err := broker.LoadUserFile(*file)
	if err != nil {
		return err
	}
	users := f.Users()
	names := make([]string, 0, len(users))
	for u := range users {
		names = append(names, u)
	}
	sort.Strings(names)
	for _, u := range names {
		fmt.Fprintf(stdout, "%s\t%s\n", u, strings.Join(users[u], ","))
	}
	return nil
}
