// Command kwal is the one binary of the project: demo, broker, bench …, cost,
// metadata dump, audit. Each subcommand lives in its own cmd_*.go file and
// registers itself in commands; the logic lives in the packages.
package main
