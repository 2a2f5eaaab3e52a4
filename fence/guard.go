package fence

import "sync"

// Guard applies the rule in memory, per key. It suits tests, examples and
// resources that live in one process (a file written by one daemon on
// behalf of remote lock holders). It is safe for concurrent use; the zero
// value is ready.
type Guard struct {
	mu      sync.Mutex
	highest map[string]uint64
}

// Admit records that a write to key with fence f is about to happen, or
// rejects it with a *StaleError. Call it and perform the write under the
// same critical section as the resource, or use Do.
func (g *Guard) Admit(key string, f uint64) error {
	if err := Valid(f, 0); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.admit(key, f)
}

func (g *Guard) admit(key string, f uint64) error {
	if err := Check(key, f, g.highest[key]); err != nil {
		return Rejected("memory", err)
	}
	if g.highest == nil {
		g.highest = map[string]uint64{}
	}
	g.highest[key] = f
	return nil
}

// Do runs write only if fence f is admitted for key, holding the Guard's
// lock while it runs, so that check and write are one step.
func (g *Guard) Do(key string, f uint64, write func() error) error {
	if err := Valid(f, 0); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.admit(key, f); err != nil {
		return err
	}
	return write()
}

// Current returns the highest fence admitted for key (zero if none).
func (g *Guard) Current(key string) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.highest[key]
}
