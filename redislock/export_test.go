package redislock

// The driver's own scripts, for the tests outside the package that hold
// a script's calls back by its SHA.
var (
	AcquireScript = acquireScript
	DequeueScript = dequeueScript
)

// The scripts that wake a queued waiter, for the tests that run them
// bare.
var (
	ReleaseScript      = releaseScript
	ForceReleaseScript = forceReleaseScript
)
