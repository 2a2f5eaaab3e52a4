package dlock

import (
	"context"
	"errors"

	"github.com/dlockdev/dlock/driver"
)

// ReleaseAll releases every lease, in reverse order, and joins the errors
// of those that could not be released cleanly. Leases of one Locker whose
// driver releases in batches (driver.BatchReleaser) are released together,
// up to 1000 per round trip.
func ReleaseAll(ctx context.Context, leases []*Lease) error {
	return releaseLeases(ctx, leases)
}

// releaseLeases releases leases, batching those of a batching driver, and
// joins the results as Release would return them one by one.
func releaseLeases(ctx context.Context, leases []*Lease) error {
	var errs []error
	batches := map[leaseHost][]*Lease{}
	for i := len(leases) - 1; i >= 0; i-- {
		ls := leases[i]
		if ls == nil {
			continue
		}
		if _, ok := ls.host.driver().(driver.BatchReleaser); ok {
			batches[ls.host] = append(batches[ls.host], ls)
			continue
		}
		errs = append(errs, ls.Release(ctx))
	}
	for host, group := range batches {
		errs = append(errs, releaseBatch(ctx, host.driver().(driver.BatchReleaser), group)...)
	}
	return errors.Join(errs...)
}

// releaseBatch releases leases of one backend in calls of at most
// maxBatch leases.
func releaseBatch(ctx context.Context, br driver.BatchReleaser, leases []*Lease) []error {
	var errs []error
	var pending []*Lease
	var priors []error
	for _, ls := range leases {
		prior, again := ls.markReleased()
		if again {
			errs = append(errs, prior)
			continue
		}
		pending, priors = append(pending, ls), append(priors, prior)
	}
	rctx, cancel := releaseContext(ctx)
	defer cancel()
	for start := 0; start < len(pending); start += maxBatch {
		chunk := pending[start:min(start+maxBatch, len(pending))]
		results := sendReleases(rctx, br, chunk)
		for i, ls := range chunk {
			errs = append(errs, ls.settleRelease(priors[start+i], results[i]))
		}
	}
	return errs
}

// sendReleases makes one batched release call; a transport failure (or a
// short answer) stands for every lease of the batch.
func sendReleases(ctx context.Context, br driver.BatchReleaser, chunk []*Lease) []error {
	items := make([]driver.ReleaseItem, len(chunk))
	for i, ls := range chunk {
		items[i] = driver.ReleaseItem{Name: ls.name, Token: ls.token}
	}
	results, err := br.ReleaseBatch(ctx, items)
	return batchOutcome(results, err, len(chunk))
}

// batchOutcome is a batched call's result for each of its n items: the
// driver's answers, or, after a transport failure or a short answer, that
// failure for every item.
func batchOutcome(results []error, err error, n int) []error {
	if err == nil && len(results) == n {
		return results
	}
	if err == nil {
		err = errors.New("driver returned a short batch")
	}
	results = make([]error, n)
	for i := range results {
		results[i] = err
	}
	return results
}
