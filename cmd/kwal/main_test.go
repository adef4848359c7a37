package main

import (
	"bytes"
	"strings"
	"testing"
)

// Every subcommand answers -h and --help with its usage and exit 0; an
// unknown flag still fails.
func TestSubcommandHelpExitsZero(t *testing.T) {
	if len(commands) < 8 {
		t.Fatalf("only %d commands registered", len(commands))
	}
	for _, c := range commands {
		for _, h := range []string{"--help", "-h"} {
			args := append(append([]string(nil), c.words...), h)
			var out, errOut bytes.Buffer
			if code := run(args, &out, &errOut); code != 0 {
				t.Errorf("kwal %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
			}
			if !strings.Contains(errOut.String(), "Usage") {
				t.Errorf("kwal %s printed no usage: %q", strings.Join(args, " "), errOut.String())
			}
		}
		var out, errOut bytes.Buffer
		args := append(append([]string(nil), c.words...), "--no-such-flag")
		if code := run(args, &out, &errOut); code == 0 {
			t.Errorf("kwal %s: exit 0", strings.Join(args, " "))
		}
	}
	for _, args := range [][]string{nil, {"help"}, {"--help"}} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != 0 {
			t.Errorf("kwal %v: exit %d", args, code)
		}
	}
}
