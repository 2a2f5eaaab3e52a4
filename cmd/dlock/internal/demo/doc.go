// Package demo runs the failure modes of distributed locking live, for
// `dlock demo`: each scenario starts real, separate worker processes (the
// dlock binary re-executed with its hidden worker command), prints what
// each did on a timeline, and ends with a one-line verdict.
//
// The scenarios and the worker roles are the two literal tables of
// scenarios.go; each scenario, with the roles only it uses, has its own
// file. The protected resources are SQLite files in the run's temporary
// directory (resource.go); the naive locks the scenarios show failing are
// written on the chosen backend (naive*.go).
package demo
