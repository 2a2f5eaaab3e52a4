package demo

import "context"

// scenario is one live demonstration.
type scenario struct {
	name, title string
	// run drives the worker processes and returns the verdict; ok is true
	// when the outcome is the one the scenario teaches.
	run func(ctx context.Context, e *env) (verdict string, ok bool, err error)
}

// scenarios, from the simplest failure to the subtlest.
var scenarios = []scenario{
	{"local-lock", "in-process locks across two processes lose updates", runLocalLock},
	{"orphan", "a lock without a TTL wedges forever after a crash", runOrphan},
	{"stale-release", "a plain DEL frees another's lock; the token check does not", runStaleRelease},
	{"correct", "two processes, one correct lock: no overlap", runCorrect},
	{"pause", "a lease expires during a SIGSTOP and two processes write", runPause},
	{"fencing", "the paused holder's stale write is rejected at the resource", runFencing},
	{"watchdog", "a job longer than its lease keeps it; a killed holder frees it within the TTL", runWatchdog},
	{"singleton", "two schedulers, one runs the job", runSingleton},
	{"billing", "naive cron double-charges; the layered fix charges once", runBilling},
	{"election", "two leaders during a pause: both write unfenced; the term fence refuses the old one", runElection},
	{"semaphore", "a crashed holder's permit comes back within the TTL, with a higher fence", runSemaphore},
}

// tour is what `dlock demo` runs with no argument (well under 30 s).
var tour = []string{"correct", "pause", "fencing"}

// role is what one worker process does.
type role func(ctx context.Context, w *worker) error

// roles maps the role a worker is started with (spawn) to its behaviour,
// grouped by the scenario whose file defines it.
var roles = map[string]role{
	"counter-local":  roleCounterLocal, // local-lock
	"counter-dlock":  roleCounterDlock,
	"naive-hold":     roleNaiveHold, // orphan
	"naive-try":      roleNaiveTry,  // orphan, stale-release
	"lease-hold":     roleLeaseHold, // orphan, watchdog
	"lease-wait":     roleLeaseWait,
	"naive-stale":    roleNaiveStale, // stale-release
	"naive-holder":   roleNaiveHolder,
	"job":            roleJob,         // correct
	"pause-holder":   rolePauseHolder, // pause, fencing, stale-release
	"writer":         roleWriter,      // pause, fencing, stale-release
	"watchdog-job":   roleWatchdogJob, // watchdog
	"watchdog-probe": roleWatchdogProbe,
	"scheduler":      roleScheduler,    // singleton
	"billing-naive":  roleBillingNaive, // billing
	"billing-fixed":  roleBillingFixed,
	"permit-wait":    rolePermitWait, // semaphore (and lease-hold; election uses pause-holder, writer)
}
