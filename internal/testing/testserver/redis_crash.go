package testserver

// Crash kills the server (SIGKILL: no shutdown, no final AOF or RDB
// write) and starts it again on the same port and directory. What survives
// depends on the persistence args it was started with: nothing by
// default; with --appendonly yes, every write the server had handed to the
// kernel (a process crash does not lose the page cache, so appendfsync
// everysec and always behave alike here; only a host crash tells them
// apart).
func (s *RedisServer) Crash() {
	s.t.Helper()
	s.Kill()
	s.start()
}
