package rediscore

// Queued is how many calls wait in k's queue.
func Queued(k *Coalescer) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.queue)
}
