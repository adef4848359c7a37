// Command kwal is the one binary of the project: demo, broker, bench …, cost,
// metadata dump, audit. Each subcommand lives in its own cmd_*.go file and
// registers itself in commands; the logic lives in the packages. The
// packages only this binary uses live under cmd/kwal/internal: demo (kwal
// demo), latbench, replbench, brokerbench, purgbench and scalebench (kwal bench …) and
// audit (kwal audit). They build clusters with localcluster and rwnode and
// share the ground-level helpers of the module's internal/ (kclient, stats).
package main
