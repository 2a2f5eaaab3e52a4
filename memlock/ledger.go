package memlock

import (
	"context"
	"slices"

	"github.com/dlockdev/dlock/driver"
)

var _ driver.Ledger = (*memDriver)(nil)

// ledger is a Store's run ledger: each name's records, newest slot
// first, and the highest fence a write has carried.
type ledger struct {
	runs  []driver.RunRecord
	fence uint64
}

// fenced refuses a write under a fence below the name's highest, and
// raises the highest to fence.
func (g *ledger) fenced(fence uint64) error {
	if fence < g.fence {
		return driver.ErrNotHeld
	}
	g.fence = fence
	return nil
}

// ClaimRun implements driver.Ledger.
func (d *memDriver) ClaimRun(ctx context.Context, rec driver.RunRecord, rerun bool, keep int) (driver.RunRecord, bool, error) {
	if err := d.begin(ctx); err != nil {
		return driver.RunRecord{}, false, err
	}
	defer d.s.mu.Unlock()
	g := d.s.ledgerOf(rec.Name)
	if err := g.fenced(rec.Fence); err != nil {
		return driver.RunRecord{}, false, err
	}
	i := slices.IndexFunc(g.runs, func(r driver.RunRecord) bool { return r.Slot.Equal(rec.Slot) })
	if i >= 0 {
		old := g.runs[i]
		if !rerun || !old.Ended.IsZero() || old.Fence >= rec.Fence {
			return old, false, nil
		}
		g.runs[i] = rec
		return rec, true, nil
	}
	g.runs = append(g.runs, rec)
	slices.SortFunc(g.runs, func(a, b driver.RunRecord) int { return b.Slot.Compare(a.Slot) })
	if len(g.runs) > keep {
		g.runs = g.runs[:keep]
	}
	return rec, true, nil
}

// FinishRun implements driver.Ledger.
func (d *memDriver) FinishRun(ctx context.Context, rec driver.RunRecord) error {
	if err := d.begin(ctx); err != nil {
		return err
	}
	defer d.s.mu.Unlock()
	g := d.s.ledgerOf(rec.Name)
	if err := g.fenced(rec.Fence); err != nil {
		return err
	}
	for i, r := range g.runs {
		if r.Slot.Equal(rec.Slot) && r.Fence == rec.Fence {
			g.runs[i].Ended, g.runs[i].Status = rec.Ended, rec.Status
			return nil
		}
	}
	return driver.ErrNotHeld
}

// Runs implements driver.Ledger.
func (d *memDriver) Runs(ctx context.Context, name string) ([]driver.RunRecord, error) {
	if err := d.begin(ctx); err != nil {
		return nil, err
	}
	defer d.s.mu.Unlock()
	return slices.Clone(d.s.ledgerOf(name).runs), nil
}

// ledgerOf returns name's ledger, creating it. s.mu is held.
func (s *Store) ledgerOf(name string) *ledger {
	g := s.ledgers[name]
	if g == nil {
		g = &ledger{}
		s.ledgers[name] = g
	}
	return g
}
