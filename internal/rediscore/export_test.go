package rediscore

// Queued is how many calls wait in k's queue.
func Queued(k *Coalescer) int { return k.calls.Waiting() }
