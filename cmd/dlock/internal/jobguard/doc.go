// Package jobguard runs a command so that no process of it outlives the
// process that started it (dlock run), even when that process is killed
// with no chance to clean up. Linux only.
//
// Start re-executes the calling program (/proc/self/exe) as a guard: a
// child subreaper that starts the command in a new process group and
// watches a control pipe whose only write end the caller holds. EOF on the
// pipe means the caller died, however it died; the guard then SIGKILLs the
// command's process group and every remaining descendant (orphans of the
// job are re-parented to the guard, so processes that left the group with
// setsid or a double fork are still found by a /proc scan), reaps them and
// exits. A parent-death signal is a second wake-up only: it fires when the
// forking thread exits, not the process. If the guard is killed, the
// caller, a subreaper too (BecomeSubreaper), kills the job itself.
//
// The program must call Main first thing when IsGuard reports true.
//
// Limits: processes handed to something outside the job (a system service
// asked to start them) are not followed; processes of another user need
// the caller to be root; if the caller and the guard are SIGKILLed at the
// same instant only the command's own parent-death signal is left; a fork
// bomb can outrun the kill loop, which gives up after five seconds.
package jobguard
