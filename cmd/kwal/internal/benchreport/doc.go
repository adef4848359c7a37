// Package benchreport holds what the reports of the bench commands
// (latbench, scalebench, failbench, brokerbench, purgbench, replbench)
// write alike: the indented JSON of a report, a gonum plot as a PNG, the
// colour of each replication mode in every chart, and a table with one
// row per metric and one column per result.
//
// It owns only the writing; what a report holds and how its figures are
// computed stay in each bench's package. Nothing here keeps state: the
// functions are safe for concurrent use on distinct writers.
package benchreport
