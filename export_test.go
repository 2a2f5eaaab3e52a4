package dlock

// WatchdogVisits returns how many lease schedules l's watchdog has taken
// from its queue in all its scans.
func WatchdogVisits(l *Locker) int64 {
	l.watchdog.mu.Lock()
	defer l.watchdog.mu.Unlock()
	return l.watchdog.visits
}
