package purgbench

import (
	"fmt"
	"os"
	"testing"
	"time"
)

func TestExpProf(t *testing.T) {
	mix := Mixes[0]
	if os.Getenv("MIX") == "high" {
		mix = Mixes[1]
	}
	via := ViaForce
	if os.Getenv("VIA") == "check" {
		via = ViaCheck
	}
	rate := 200_000.0
	if os.Getenv("RATE") == "50" {
		rate = 50_000
	}
	for i := 0; i < 2; i++ {
		lo := P("", rate, time.Second, mix, via, 1)
		f := P(Kwal, rate, time.Second, mix, via, 1)
		fmt.Printf("kwal %s %s net %.0f ns/req rate %.0f p99 %.2f fired %.0f/%.0f\n", mix.Name, via, f.CPUNsPerTimer-lo.CPUNsPerTimer, f.Rate, f.P99LateMs, f.Fired, f.Expected)
	}
}
