package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// TestChaosParallel runs three in-process schedules two at once: each
// seed is reported once, the totals count all three, and the process
// runner refuses --parallel (its versitygw and proxies are one set).
func TestChaosParallel(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three chaos schedules")
	}
	var out, errOut bytes.Buffer
	if err := runChaos([]string{"--first", "7", "--seeds", "3", "--parallel", "2", "--phases"}, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s%s", err, out.String(), errOut.String())
	}
	s := out.String()
	for _, seed := range []string{"7", "8", "9"} {
		if n := len(regexp.MustCompile(`(?m)^seed `+seed+` ok `).FindAllString(s, -1)); n != 1 {
			t.Errorf("seed %s reported %d times:\n%s", seed, n, s)
		}
	}
	if !strings.Contains(s, "3 schedules, 3 passed") || !strings.Contains(s, "(2 at once:") {
		t.Errorf("totals do not count the three schedules run two at once:\n%s", s)
	}
	if strings.Count(s, "  phases: start ") != 3 {
		t.Errorf("want one phase line per schedule:\n%s", s)
	}
	if err := runChaos([]string{"--runner", "process", "--parallel", "2"}, &out, &errOut); err == nil || !strings.Contains(err.Error(), "in-process runner only") {
		t.Errorf("--runner process --parallel 2: %v, want a refusal", err)
	}
}
